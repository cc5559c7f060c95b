"""Time to a usable 1 MB artifact through kcache's client (Python binding).

A real kcache-server (disk storage) on a loopback port. Cases, median of 30:
- node-tier hit (bundle already on this node; verified on read),
- server hit (empty node tier each time; fetched, verified, published locally),
- a miss's overhead on top of the compile (lease, upload, node publish; the
  "compile" returns a prebuilt bundle, so its own cost is ~0),
and, as references in the same run, reading the same bytes from a file and a
plain HTTP GET of them from the same server (urllib, no verification).

    .venv/bin/python bench/client/bench_client.py > bench/client/REPORT.md
"""

from __future__ import annotations

import json
import os
import pathlib
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from kcache import _core

REPO = pathlib.Path(__file__).resolve().parents[2]
N = 30


def bundle(key: str, size: int = 1 << 20) -> bytes:
    manifest = {"key": key, "label": "Bench/cpu:avx2/f32/default/train", "compile_seconds": 1.0}
    return _core.write_bundle(json.dumps(manifest), [("torch/mega_cache", os.urandom(size))])


def median_ms(fn) -> float:
    times = []
    for _ in range(N):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> None:
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="kcache-bench-client-"))
    binary = os.environ.get("KCACHE_SERVER_BIN", str(REPO / "build/dev/server/kcache-server"))
    server = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--storage", f"disk:{tmp / 'data'}"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        url = "http://" + server.stdout.readline().decode().split()[-1]
        key = secrets.token_hex(32)
        data = bundle(key)
        seeder = _core.Client(url=url, local_dir=str(tmp / "seed"))
        assert seeder.put(key, data)

        node = _core.Client(url=url, local_dir=str(tmp / "node"))
        node.get_or_compile(key, lambda: data)  # publish on the node
        node_hit = median_ms(lambda: node.get_or_compile(key, lambda: data))

        def server_hit():
            c = _core.Client(url=url, local_dir=str(tempfile.mkdtemp(dir=tmp)))
            out, source = c.get_or_compile(key, lambda: data)
            assert source == "server"

        server_ms = median_ms(server_hit)

        def miss():
            k = secrets.token_hex(32)
            b = bundle(k)
            c = _core.Client(url=url, local_dir=str(tempfile.mkdtemp(dir=tmp)))
            t0 = time.perf_counter()
            out, source = c.get_or_compile(k, lambda: b)
            assert source == "compiled"
            return time.perf_counter() - t0

        miss_ms = statistics.median(miss() for _ in range(N)) * 1e3
        path = tmp / "plain.bin"
        path.write_bytes(data)
        file_ms = median_ms(lambda: path.read_bytes())
        http_ms = median_ms(lambda: urllib.request.urlopen(f"{url}/v1/artifacts/{key}").read())
    finally:
        server.terminate()
        server.wait(timeout=10)

    print("# Client: time to a usable 1 MB artifact (Python binding)\n")
    print(f"{os.cpu_count()} CPUs, loopback, disk-backed kcache-server; median of {N}.\n")
    print("| case | ms | vs plain HTTP GET |")
    print("|---|---:|---:|")
    for name, ms in (("node-tier hit (verified)", node_hit), ("server hit (fetch, verify, publish on node)", server_ms),
                     ("miss overhead beyond the compile (lease, upload, publish)", miss_ms),
                     ("reference: read the bytes from a file", file_ms),
                     ("reference: plain HTTP GET from the same server", http_ms)):
        print(f"| {name} | {ms:.2f} | {ms / http_ms:.2f}x |")
    print("\nCommand: `.venv/bin/python bench/client/bench_client.py > bench/client/REPORT.md`."
          " Not measured yet: the same from C++.")


if __name__ == "__main__":
    sys.exit(main())
