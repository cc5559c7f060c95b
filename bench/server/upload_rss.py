"""The server's memory while one 64 MiB upload arrives slowly (issue 19):
prints VmRSS and RssAnon of a kcache-server on disk storage before, at the
peak while the body arrives (VmRSS) or at any point (RssAnon, sampled every
5 ms through the check and the store) and after the 201. Uses no flags a
server without the upload spool lacks, so it measures old builds too:

    KCACHE_SERVER_BIN=path/to/kcache-server .venv/bin/python bench/server/upload_rss.py
"""

from __future__ import annotations

import os
import pathlib
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests/python/server"))
from server_harness import KcacheServer, make_bundle, new_key, read_until_quiet, status_of

MIB = 1 << 20


def kib(srv: KcacheServer, field: str) -> int:
    for line in open(f"/proc/{srv.proc.pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def main() -> None:
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="kcache-upload-rss-"))
    srv = KcacheServer(tmp, storage=f"disk:{tmp / 'store'}", args=["--max-body-bytes", "128M"])
    try:
        warm = new_key()
        srv.put_artifact(warm, make_bundle(warm))
        key = new_key()
        bundle = make_bundle(key, payload=os.urandom(64 * MIB))
        rss0, anon0 = kib(srv, "VmRSS"), kib(srv, "RssAnon")
        peak_anon, stop = [anon0], threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak_anon[0] = max(peak_anon[0], kib(srv, "RssAnon"))
                time.sleep(0.005)

        sampler = threading.Thread(target=sample)
        sampler.start()
        s = srv.connect()
        s.sendall(f"PUT /v1/artifacts/{key} HTTP/1.1\r\nHost: t\r\nContent-Length: {len(bundle)}\r\n\r\n".encode())
        peak_rss = rss0
        for i in range(0, len(bundle), MIB):
            peak_rss = max(peak_rss, kib(srv, "VmRSS"))
            s.sendall(bundle[i:i + MIB])
            time.sleep(0.02)
        status = status_of(read_until_quiet(s, 30))
        stop.set()
        sampler.join()
        s.close()
        print(f"{srv.proc.args[0]}: status {status}, body {len(bundle) >> 10} KiB; VmRSS before {rss0} KiB, "
              f"peak while arriving {peak_rss} KiB, after {kib(srv, 'VmRSS')} KiB; RssAnon before {anon0} KiB, "
              f"peak {peak_anon[0]} KiB, after {kib(srv, 'RssAnon')} KiB")
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
