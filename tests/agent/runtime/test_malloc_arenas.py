"""The agent bounds glibc's malloc arenas (its RSS crept up under churn without), unless the operator chose."""

from __future__ import annotations

import os
import platform
import sys
import threading
from pathlib import Path

import pytest

from rackplan.agent.runtime.malloc_arenas import HeapTrimmer, limit_arenas, malloc_trim

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="mallopt(M_ARENA_MAX) is glibc's")
def test_glibc_takes_the_limit() -> None:
    assert limit_arenas(2, environ={}) == 2


def test_an_operators_malloc_arena_max_is_left_alone() -> None:
    assert limit_arenas(2, environ={"MALLOC_ARENA_MAX": "8"}) is None


def rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's")
def test_a_trim_hands_freed_heap_pages_back() -> None:
    # every other 20 KB block freed: holes between live blocks, which malloc keeps (RSS) until trimmed
    trim = malloc_trim()
    assert trim is not None
    blocks = [bytearray(20_000) for _ in range(2_000)]
    del blocks[::2]
    before = rss_bytes()
    assert trim() is True
    assert before - rss_bytes() > 5 * 2**20  # of the 20 MB freed (15 MiB measured here)
    del blocks


def test_the_trimmer_trims_on_its_interval_until_stopped() -> None:
    calls = threading.Semaphore(0)

    def trim() -> bool:
        calls.release()
        return True

    trimmer = HeapTrimmer(trim, every_s=0.01).start()
    assert calls.acquire(timeout=10) and calls.acquire(timeout=10)  # at least twice, on its own thread
    trimmer.stop()
    done = trimmer.trims
    assert not trimmer._thread.is_alive() and trimmer.trims == done  # stopped: no trim after
