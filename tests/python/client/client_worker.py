"""A rank in a client integration test: get_or_compile each key, where the
compile callback runs a real subprocess that records the compile.

    python client_worker.py URL LOCAL_DIR COUNTER_FILE OUT_JSON KEY...

The callback's subprocess appends "<key>\\n" to COUNTER_FILE (O_APPEND) and
sleeps a little, so concurrent ranks overlap. OUT_JSON receives
{key: [source, sha256 of the bytes]}.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

from kcache import _core


def main() -> int:
    url, local_dir, counter, out, *keys = sys.argv[1:]
    client = _core.Client(url, None, local_dir, log_level="error")
    results = {}
    for key in keys:
        def compile_fn(key=key):
            subprocess.run([sys.executable, "-c",
                            "import os, sys, time\n"
                            "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT)\n"
                            "os.write(fd, (sys.argv[2] + '\\n').encode()); time.sleep(0.3)\n",
                            counter, key], check=True)
            manifest = {"key": key, "label": "Worker/cpu:avx2/f32/default/train", "compile_seconds": 0.3,
                        "producer": {"pid": os.getpid()}}
            return _core.write_bundle(json.dumps(manifest), [("mega_cache", os.urandom(4096))])

        data, source = client.get_or_compile(key, compile_fn)
        results[key] = [source, hashlib.sha256(data).hexdigest()]
    with open(out, "w") as f:
        json.dump({"results": results, "stats": client.stats()}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
