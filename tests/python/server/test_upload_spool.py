"""Large uploads are spooled to a nameless temporary file as they arrive,
over real sockets to a real kcache-server: the server's memory does not
grow with the body, the artifact reads back byte-identical, an aborted or
oversized upload leaves no file and stores nothing, a corrupt bundle is
refused exactly as when it was held in memory, and a spool directory that
cannot be used stops the server at startup with a clear error."""

from __future__ import annotations

import os
import pathlib
import subprocess
import threading
import time

import pytest

from server_harness import SERVER_BIN, make_bundle, new_key, read_until_quiet, status_of
from test_signed_uploads import keys, signed_bundle  # noqa: F401 (keys is a fixture)

MIB = 1 << 20


def status_kib(srv, field: str) -> int:
    for line in open(f"/proc/{srv.proc.pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(field)


def spool_files(srv, spool_dir: pathlib.Path) -> list[str]:
    """The server's open descriptors on files in spool_dir (O_TMPFILE files
    show as 'DIR/#INODE (deleted)')."""
    out = []
    fd_dir = f"/proc/{srv.proc.pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
        except FileNotFoundError:
            continue
        if target.startswith(str(spool_dir) + "/"):
            out.append(target)
    return out


def wait_for(predicate, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def put_head(key: str, length: int | None) -> bytes:
    framing = f"Content-Length: {length}\r\n" if length is not None else "Transfer-Encoding: chunked\r\n"
    return (f"PUT /v1/artifacts/{key} HTTP/1.1\r\nHost: t\r\nContent-Type: application/octet-stream\r\n"
            f"{framing}\r\n").encode()


@pytest.fixture
def spool(tmp_path) -> pathlib.Path:
    d = tmp_path / "spool"
    d.mkdir()
    return d


def test_a_64_mib_upload_sent_slowly_does_not_grow_the_servers_memory(start_server, spool, tmp_path):
    # Before: the body grew in a vector as it arrived, +64 MiB (and more for
    # the vector's doubling) of resident memory for one upload.
    srv = start_server(storage=f"disk:{tmp_path / 'store'}",
                       args=["--upload-spool-dir", str(spool), "--max-body-bytes", "128M"])
    warm = new_key()
    assert srv.put_artifact(warm, make_bundle(warm)).status == 201  # threads and allocator warmed up
    key = new_key()
    bundle = make_bundle(key, payload=os.urandom(64 * MIB))
    assert len(bundle) >= 64 * MIB
    rss0, anon0 = status_kib(srv, "VmRSS"), status_kib(srv, "RssAnon")
    # Anonymous memory (where a body held in memory lives) is sampled all
    # along, the check and the store included; VmRSS while the body arrives.
    peak_anon, sampling = [anon0], threading.Event()

    def sample():
        while not sampling.is_set():
            peak_anon[0] = max(peak_anon[0], status_kib(srv, "RssAnon"))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    peak_rss = rss0
    s = srv.connect()
    try:
        s.sendall(put_head(key, len(bundle)))
        step = MIB
        for i in range(0, len(bundle), step):  # 65 chunks over ~2 s
            peak_rss = max(peak_rss, status_kib(srv, "VmRSS"))  # before each chunk: the last is never checked yet
            s.sendall(bundle[i:i + step])
            time.sleep(0.02)
            if i == 32 * MIB:
                assert len(spool_files(srv, spool)) == 1, "the body is not in the spool directory"
        reply = read_until_quiet(s, 30)
    finally:
        s.close()
        sampling.set()
        sampler.join()
    assert status_of(reply) == 201, reply[-300:]
    after_rss, after_anon = status_kib(srv, "VmRSS"), status_kib(srv, "RssAnon")
    print(f"\nbody {len(bundle) >> 10} KiB; VmRSS before {rss0} KiB, peak while it arrived {peak_rss} KiB, "
          f"after 201 {after_rss} KiB; RssAnon before {anon0} KiB, peak {peak_anon[0]} KiB, after 201 {after_anon} KiB")
    quarter = len(bundle) // 4 // 1024
    assert peak_rss - rss0 < quarter, (rss0, peak_rss)
    assert peak_anon[0] - anon0 < quarter, (anon0, peak_anon[0])  # the check and the store copied nothing
    assert after_rss - rss0 < quarter, (rss0, after_rss)
    assert wait_for(lambda: not spool_files(srv, spool)), spool_files(srv, spool)
    assert os.listdir(spool) == []
    assert srv.get(f"/v1/artifacts/{key}", timeout=30).body == bundle


def test_an_upload_aborted_midway_leaves_no_file_and_stores_nothing(start_server, spool):
    # The budget is exactly one body: if the aborted upload kept its bytes
    # (in memory or on disk), the next one would be answered 503.
    srv = start_server(args=["--upload-spool-dir", str(spool), "--max-body-bytes", "16M",
                             "--max-upload-bytes-in-flight", "16M"])
    key = new_key()
    bundle = make_bundle(key, payload=os.urandom(12 * MIB))
    s = srv.connect()
    s.sendall(put_head(key, len(bundle)) + bundle[:len(bundle) // 2])
    assert wait_for(lambda: len(spool_files(srv, spool)) == 1), "the body is not in the spool directory"
    s.close()
    assert wait_for(lambda: not spool_files(srv, spool)), spool_files(srv, spool)
    assert os.listdir(spool) == []
    assert srv.get(f"/v1/artifacts/{key}").status == 404
    assert "closed mid-body" in srv.read_log()
    assert srv.put_artifact(key, bundle).status == 201  # its budget came back
    assert srv.get(f"/v1/artifacts/{key}").body == bundle
    assert not spool_files(srv, spool)


def test_an_oversized_chunked_upload_is_refused_and_leaves_no_file(start_server, spool):
    # A chunked body declares no length: it is spooled as it comes and cut
    # off with 413 the moment it passes --max-body-bytes.
    srv = start_server(args=["--upload-spool-dir", str(spool), "--max-body-bytes", "4M"])
    key = new_key()
    s = srv.connect()
    s.sendall(put_head(key, None))
    chunk = os.urandom(MIB)
    s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
    s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
    assert wait_for(lambda: len(spool_files(srv, spool)) == 1), "the body is not in the spool directory"
    reply = b""
    try:
        for _ in range(4):
            s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    reply = read_until_quiet(s, 5)
    s.close()
    assert status_of(reply) == 413 and b"too_large" in reply, reply[:300]
    assert wait_for(lambda: not spool_files(srv, spool)), spool_files(srv, spool)
    assert os.listdir(spool) == []
    assert srv.get(f"/v1/artifacts/{key}").status == 404


def test_a_corrupt_spooled_bundle_is_refused_with_the_same_error_as_in_memory(start_server, spool):
    key = new_key()
    bundle = bytearray(make_bundle(key, payload=os.urandom(3 * MIB)))
    bundle[len(bundle) // 2] ^= 0x01  # inside the section: the SHA-256 trailer no longer matches
    in_memory = start_server(args=["--upload-spool-threshold", "8M"])
    spooled = start_server(args=["--upload-spool-dir", str(spool), "--upload-spool-threshold", "64K"])
    expected = in_memory.put_artifact(key, bytes(bundle))
    assert expected.status == 400 and expected.json()["error"] == "corrupt", expected.body
    got = spooled.put_artifact(key, bytes(bundle))
    assert (got.status, got.json()) == (expected.status, expected.json())
    assert spooled.get(f"/v1/artifacts/{key}").status == 404
    assert spooled.get("/v1/stats").json()["uploads"]["rejected"] == 1
    assert wait_for(lambda: not spool_files(spooled, spool)) and os.listdir(spool) == []
    # The same bytes unbroken are stored, through the spool.
    bundle[len(bundle) // 2] ^= 0x01
    assert spooled.put_artifact(key, bytes(bundle)).status == 201
    assert spooled.get(f"/v1/artifacts/{key}").body == bytes(bundle)


def test_the_disk_storages_tmp_is_the_default_spool(start_server, tmp_path):
    store = tmp_path / "store"
    srv = start_server(storage=f"disk:{store}")
    key = new_key()
    bundle = make_bundle(key, payload=os.urandom(4 * MIB))
    s = srv.connect()
    s.sendall(put_head(key, len(bundle)) + bundle[:2 * MIB])
    assert wait_for(lambda: len(spool_files(srv, store / "tmp")) == 1), "not spooled in the store's tmp/"
    s.sendall(bundle[2 * MIB:])
    assert status_of(read_until_quiet(s, 10)) == 201
    s.close()
    assert srv.get(f"/v1/artifacts/{key}").body == bundle
    assert "upload_spool=" + str(store / "tmp") in srv.read_log()


@pytest.mark.parametrize("case", ["missing", "a_file", "read_only"])
def test_an_unusable_spool_directory_stops_the_server_at_startup(tmp_path, case):
    target = tmp_path / "spool"
    if case == "a_file":
        target.write_text("x")
    elif case == "read_only":
        target.mkdir()
        if os.geteuid() == 0:
            # Root writes through directory modes: a read-only filesystem
            # (as the disk-full test, this needs root, which CI has).
            subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(target)],
                           check=True)
        else:
            target.chmod(0o500)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KCACHE_")}
    try:
        proc = subprocess.run([str(SERVER_BIN), "--listen", "127.0.0.1:0", "--storage", "memory:",
                               "--upload-spool-dir", str(target)], capture_output=True, env=env,
                              timeout=20)
    finally:
        if case == "read_only" and os.geteuid() == 0:
            subprocess.run(["umount", str(target)], check=True)
    assert proc.returncode == 2, proc
    err = proc.stderr.decode()
    why = {"missing": "No such file or directory", "a_file": "not a directory", "read_only": "not writable"}[case]
    assert "--upload-spool-dir" in err and str(target) in err and why in err, err
    assert b"listening on" not in proc.stdout


def test_signatures_are_checked_on_spooled_uploads(start_server, spool, keys):
    # --upload-spool-threshold 0: every upload goes through the spool, so the
    # signature check runs on the mapped file.
    srv = start_server(args=["--require-signed", "--trusted-keys", str(keys["file"]),
                             "--upload-spool-dir", str(spool), "--upload-spool-threshold", "0"])
    untrusted = new_key()
    r = srv.put_artifact(untrusted, signed_bundle(untrusted, keys["other"]))
    assert r.status == 400 and r.json()["error"] == "bad_signature"
    assert srv.request("HEAD", f"/v1/artifacts/{untrusted}").status == 404
    unsigned = new_key()
    r = srv.put_artifact(unsigned, make_bundle(unsigned))
    assert r.status == 400 and r.json()["error"] == "bad_signature"
    good = new_key()
    bundle = signed_bundle(good, keys["trusted"])
    assert srv.put_artifact(good, bundle).status == 201
    assert srv.get(f"/v1/artifacts/{good}").body == bundle
    assert os.listdir(spool) == []


def test_a_64_mib_upload_to_redis_storage_is_sent_from_the_spool_without_a_copy(start_server, spool, redis_url):
    # Before: Redis storage copied the spooled body into a vector (+64 MiB)
    # and formatted every chunk's SET into one pipeline (+64 MiB more in
    # hiredis's buffer). Now it sends from the mapping, 8 MiB of chunks at a
    # time. The put pause (KCACHE_FAULT_PAUSE_PUT_MS) holds the put after
    # the chunks are written and before the publish, while the old copy was
    # still alive; its log line is the event the measurement waits for.
    srv = start_server(storage=redis_url, env={"KCACHE_FAULT_PAUSE_PUT_MS": "2000"},
                       args=["--upload-spool-dir", str(spool), "--max-body-bytes", "128M"])
    key = new_key()
    bundle = make_bundle(key, payload=os.urandom(64 * MIB))
    anon0 = status_kib(srv, "RssAnon")
    answers: list = []
    put = threading.Thread(target=lambda: answers.append(srv.put_artifact(key, bundle)))
    put.start()
    try:
        assert wait_for(lambda: f"put of {key} paused" in srv.read_log(), 60), srv.read_log()[-2000:]
        anon_paused = status_kib(srv, "RssAnon")
    finally:
        put.join(60)
    print(f"\nRssAnon before {anon0} KiB, with the chunks written {anon_paused} KiB")
    assert answers and answers[0].status == 201, answers
    assert anon_paused - anon0 < 16 * 1024, (anon0, anon_paused)  # no copy of the 64 MiB body
    assert srv.get(f"/v1/artifacts/{key}", timeout=30).body == bundle
