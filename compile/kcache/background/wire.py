"""Framed messages between a rank and its compile worker: a 4-byte length,
then a pickle. Both ends are processes of the same job, started by it: the
pipes are private to them."""

from __future__ import annotations

import os
import pickle
import struct
from typing import Any

_HEADER = struct.Struct("!I")
MAX_MESSAGE = 1 << 31


def encode(message: Any) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    if len(body) >= MAX_MESSAGE:
        raise ValueError(f"message of {len(body)} bytes is too large")
    return _HEADER.pack(len(body)) + body


def write(fd: int, message: Any) -> None:
    """Writes one message (blocking until the pipe takes all of it)."""
    write_encoded(fd, encode(message))


def write_encoded(fd: int, encoded: bytes) -> None:
    data = memoryview(encoded)
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _read_exact(fd: int, n: int) -> bytes | None:
    parts, left = [], n
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read(fd: int) -> Any:
    """One message (blocking); None at the end of the stream."""
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    body = _read_exact(fd, _HEADER.unpack(header)[0])
    return None if body is None else pickle.loads(body)


class Reader:
    """Non-blocking reads of whole messages from a pipe set O_NONBLOCK."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self.buf = bytearray()
        self.closed = False

    def messages(self) -> list[Any]:
        """Every whole message readable now (never blocks)."""
        while not self.closed:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                self.closed = True
                break
            self.buf += chunk
        out = []
        while len(self.buf) >= _HEADER.size:
            n = _HEADER.unpack_from(self.buf)[0]
            if len(self.buf) < _HEADER.size + n:
                break
            out.append(pickle.loads(bytes(self.buf[_HEADER.size:_HEADER.size + n])))
            del self.buf[:_HEADER.size + n]
        return out
