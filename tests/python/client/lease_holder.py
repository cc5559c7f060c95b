"""Takes the lease on KEY through get_or_compile and never finishes: the
callback touches READY_FILE and sleeps until the test SIGKILLs this process.

    python lease_holder.py URL KEY READY_FILE
"""

from __future__ import annotations

import pathlib
import sys
import time

from kcache import _core


def main() -> None:
    url, key, ready = sys.argv[1:]
    client = _core.Client(url, None, "none", log_level="error")

    def compile_fn():
        pathlib.Path(ready).touch()
        time.sleep(3600)
        return b""

    client.get_or_compile(key, compile_fn)


if __name__ == "__main__":
    main()
