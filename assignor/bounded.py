"""Read a file or a stream, but never more than a limit: ``/dev/zero`` or a 50 GB file is refused, not read.

One rule for every input an operator hands the command line (an instance, a
settings file): a regular file larger than the limit is refused from its size
before a byte is read; anything else (a pipe, stdin, a device) is read in
chunks and refused as soon as it passes the limit, so the memory used is at
most the limit plus one chunk, and an endless stream ends.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (issue 29)

if TYPE_CHECKING:
    from typing import BinaryIO

#: bytes read at once from a stream whose size is not known in advance
CHUNK_BYTES = 1 << 20


class TooLargeError(ValueError):
    """The input holds more than ``limit`` bytes; ``size`` is its size when known (a regular file)."""

    def __init__(self, limit: int, size: int | None = None) -> None:
        self.limit = limit
        self.size = size
        if size is not None:
            text = f"{size} bytes, over the limit of {describe_bytes(limit)}"
        else:
            text = f"more than the limit of {describe_bytes(limit)}; reading stopped there"
        super().__init__(text)


def describe_bytes(n: int) -> str:
    """``268435456`` -> ``256 MiB``: limits as an operator writes them."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


def read_bounded(stream: BinaryIO, limit: int) -> bytes:
    """All of ``stream``'s bytes, or :class:`TooLargeError` once it passes ``limit`` (never read further)."""
    try:
        info = os.fstat(stream.fileno())
    except (AttributeError, OSError, ValueError):  # BytesIO and friends: no descriptor
        info = None
    if info is not None and stat.S_ISREG(info.st_mode) and info.st_size > limit:
        raise TooLargeError(limit, info.st_size)
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = stream.read(min(CHUNK_BYTES, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise TooLargeError(limit)
