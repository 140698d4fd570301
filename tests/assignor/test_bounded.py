"""Bounded reads (issue 24 #12): an endless or huge input is refused at the limit, never read further."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rackplan.assignor.bounded import CHUNK_BYTES, TooLargeError, describe_bytes, read_bounded


class Endless(io.RawIOBase):
    """``/dev/zero`` that counts what was asked of it."""

    def __init__(self) -> None:
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        n = len(buffer)
        buffer[:n] = b"\0" * n
        self.read_bytes += n
        return n


def test_an_endless_stream_stops_at_the_limit() -> None:
    stream = Endless()
    limit = 3 * CHUNK_BYTES + 5
    with pytest.raises(TooLargeError, match=r"more than the limit of \d+ bytes; reading stopped there"):
        read_bounded(stream, limit)  # type: ignore[arg-type]
    assert stream.read_bytes == limit + 1  # one byte past the limit tells "more", nothing further


@given(st.binary(max_size=300), st.integers(min_value=0, max_value=300))
def test_a_stream_is_read_whole_exactly_when_within_the_limit(data: bytes, limit: int) -> None:
    if len(data) <= limit:
        assert read_bounded(io.BytesIO(data), limit) == data
    else:
        with pytest.raises(TooLargeError):
            read_bounded(io.BytesIO(data), limit)


def test_a_regular_file_over_the_limit_is_refused_from_its_size_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    with open(path, "wb") as f:
        f.truncate(300 << 20)  # sparse: 300 MiB that cost nothing
    with open(path, "rb") as f:
        with pytest.raises(TooLargeError, match=r"^314572800 bytes, over the limit of 256 MiB$") as e:
            read_bounded(f, 256 << 20)
        assert f.tell() == 0  # not a byte read
    assert e.value.size == 300 << 20
    path.write_bytes(b"x" * 10)
    with open(path, "rb") as f:
        assert read_bounded(f, 10) == b"x" * 10


def test_limits_are_written_as_an_operator_would() -> None:
    assert [describe_bytes(n) for n in (256 << 20, 4 << 20, 1 << 30, 1536, 1000)] == [
        "256 MiB",
        "4 MiB",
        "1 GiB",
        "1536 bytes",
        "1000 bytes",
    ]
