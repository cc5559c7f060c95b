"""A real full file system under kcache-server's disk storage and upload
spool (an 8 MiB tmpfs; mounting one needs root, which CI has — elsewhere these
tests skip, and scripts/test_summary.py allows that skip by name).

test_artifacts.py's test_storage_full_is_507 only exercises the byte budget
(--max-bytes): the backend refuses before it writes anything. Here the
writes themselves fail with ENOSPC — in the spool while a large body
arrives, in the store's temporary files, for small and large bodies — and
the server must answer 507 with a clear error, keep nothing partial, go on
serving reads and probes, start again on the full disk, and take uploads
again once there is room."""

from __future__ import annotations

import hashlib
import os
import pathlib
import subprocess

import pytest
import redis

from server_harness import KcacheServer, make_bundle, new_key, read_until_quiet, status_of
from test_upload_spool import put_head, spool_files, wait_for

MIB = 1 << 20


@pytest.fixture
def tmpfs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root or CAP_SYS_ADMIN")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(path: pathlib.Path) -> int:
    """Writes zeros to `path` until the file system is full; its size."""
    n = 0
    with open(path, "wb", buffering=0) as f:
        chunk = b"\0" * 4096
        while True:
            try:
                n += f.write(chunk)
            except OSError:
                break
    return n


def free_bytes(mnt: pathlib.Path) -> int:
    st = os.statvfs(mnt)
    return st.f_bavail * st.f_frsize


def files_under(d: pathlib.Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())


def stored_objects(store: pathlib.Path) -> set[str]:
    return {p.name for p in (store / "objects").rglob("*") if p.is_file() and not p.name.endswith(".meta")}


def test_uploads_on_a_full_tmpfs_are_507_nothing_partial_and_reads_go_on(tmpfs, tmp_path):
    store, spool = tmpfs / "store", tmpfs / "spool"
    spool.mkdir()
    # No hot tier: every GET below reads its object file from the full disk.
    args = ["--upload-spool-dir", str(spool), "--hot-cache-bytes", "0", "--resp-listen", "127.0.0.1:0"]
    srv = KcacheServer(tmp_path, storage=f"disk:{store}", args=args)
    try:
        stored: dict[str, bytes] = {}
        for _ in range(4):
            key = new_key()
            bundle = make_bundle(key, payload=os.urandom(256 << 10))
            assert srv.put_artifact(key, bundle).status == 201
            stored[key] = bundle
        resp = redis.Redis(port=srv.resp_port, socket_timeout=10, retry=None)
        assert resp.set("pt2:kept", b"v" * 5000)
        filler = tmpfs / "filler"
        fill(filler)
        assert free_bytes(tmpfs) < 64 << 10
        # RESP: a SET that cannot be written is Redis's OOM error, GETs go on.
        with pytest.raises(redis.exceptions.OutOfMemoryError, match="No space left on device"):  # -OOM …
            resp.set("pt2:refused", os.urandom(300 << 10))
        assert resp.get("pt2:refused") is None and resp.get("pt2:kept") == b"v" * 5000

        refused = {}
        for name, size in (("small", 2 << 10), ("medium", 256 << 10), ("spooled", 3 * MIB // 2)):
            key = new_key()
            bundle = make_bundle(key, payload=os.urandom(size))
            r = srv.put_artifact(key, bundle)
            assert r.status == 507, (name, r.status, r.body)
            body = r.json()
            assert body["error"] in ("storage_full", "spool_full"), body
            assert "No space left on device" in body["message"], body
            refused[key] = bundle
        # A large upload refused mid-body, as it arrives: the spool cannot grow.
        key = new_key()
        bundle = make_bundle(key, payload=os.urandom(3 * MIB // 2))
        s = srv.connect()
        try:
            s.sendall(put_head(key, len(bundle)))
            try:
                s.sendall(bundle)
            except (BrokenPipeError, ConnectionResetError):
                pass
            reply = read_until_quiet(s, 10)
        finally:
            s.close()
        assert status_of(reply) == 507 and b"_full" in reply, reply[:300]
        refused[key] = bundle

        # Nothing partial: no object, sidecar or temp file of a refused key,
        # no spool file left, and the refused keys read as absent.
        assert wait_for(lambda: not spool_files(srv, spool) and not spool_files(srv, store / "tmp"))
        assert os.listdir(spool) == [] and os.listdir(store / "tmp") == []
        resp_kept = hashlib.sha256(b"kcache-resp-v1\0pt2:kept").hexdigest()  # docs/protocol.md "Storage"
        assert stored_objects(store) == set(stored) | {resp_kept}
        for key in refused:
            assert srv.get(f"/v1/artifacts/{key}").status == 404
            assert srv.request("HEAD", f"/v1/artifacts/{key}").status == 404
            assert srv.get(f"/v1/entries/{key}").status == 404
        # Reads, probes, listing and stats go on while the disk is full.
        for key, bundle in stored.items():
            r = srv.get(f"/v1/artifacts/{key}")
            assert r.status == 200 and r.body == bundle
        assert srv.get("/healthz").status == 200
        assert srv.get("/readyz").status == 200
        assert len(srv.get("/v1/entries").json()["entries"]) == len(stored) + 1  # and the RESP value
        stats = srv.get("/v1/stats").json()
        assert stats["uploads"]["rejected"] >= len(refused), stats
        assert 'kcache_storage_errors_total{op="put"}' in srv.get("/metrics").body.decode()
        log = srv.read_log()
        assert "No space left on device" in log, log[-2000:]

        # Restarted on the full disk: it starts (reads need no room) and
        # serves what it has.
        assert srv.stop() == 0
        srv = KcacheServer(tmp_path, storage=f"disk:{store}", args=args)
        for key, bundle in stored.items():
            assert srv.get(f"/v1/artifacts/{key}").body == bundle
        key, bundle = next(iter(refused.items()))
        assert srv.put_artifact(key, bundle).status == 507

        # Room again: the refused uploads are taken, and read back whole.
        filler.unlink()
        for key, bundle in refused.items():
            r = srv.put_artifact(key, bundle)
            assert r.status == 201, (r.status, r.body)
            assert srv.get(f"/v1/artifacts/{key}").body == bundle
        for key, bundle in stored.items():
            assert srv.get(f"/v1/artifacts/{key}").body == bundle
        verify = srv.request("POST", "/v1/verify").json()
        assert verify["corrupt"] == [] and verify["checked"] == len(stored) + len(refused) + 1, verify
    finally:
        code = srv.stop()
    assert code == 0, srv.read_log()[-3000:]
