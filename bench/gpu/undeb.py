"""Extracts .deb packages into a prefix with the Python standard library only
(the GPU machine may lack dpkg): a .deb is an `ar` archive whose data.tar.*
member holds the files.

    python bench/gpu/undeb.py DEB_DIR PREFIX
"""

from __future__ import annotations

import io
import pathlib
import sys
import tarfile


def ar_members(data: bytes):
    if not data.startswith(b"!<arch>\n"):
        raise ValueError("not an ar archive")
    pos = 8
    while pos + 60 <= len(data):
        header = data[pos:pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        yield name, data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size & 1)


def extract(deb: pathlib.Path, prefix: pathlib.Path) -> int:
    for name, payload in ar_members(deb.read_bytes()):
        if name.startswith("data.tar"):
            if name.endswith(".zst"):
                raise ValueError(f"{deb.name}: zstd-compressed data needs dpkg-deb")
            with tarfile.open(fileobj=io.BytesIO(payload), mode="r:*") as tar:
                members = [m for m in tar.getmembers() if not m.isdev()]
                tar.extractall(prefix, members=members, filter="tar")
                return len(members)
    raise ValueError(f"{deb.name}: no data.tar member")


def main() -> None:
    debs, prefix = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    prefix.mkdir(parents=True, exist_ok=True)
    files = sorted(debs.glob("*.deb"))
    if not files:
        sys.exit(f"undeb: no .deb files in {debs} (run bench/gpu/fetch_debs.sh and carry .gpu-debs)")
    total = sum(extract(deb, prefix) for deb in files)
    print(f"undeb: {len(files)} packages, {total} entries into {prefix}")


if __name__ == "__main__":
    main()
