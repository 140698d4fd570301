"""The agent bounds glibc's malloc arenas (its RSS crept up under churn without), unless the operator chose."""

from __future__ import annotations

import platform
import sys

import pytest

from rackplan.agent.runtime.malloc_arenas import fix_mmap_threshold, limit_arenas

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="mallopt(M_ARENA_MAX) is glibc's")
def test_glibc_takes_the_limit() -> None:
    assert limit_arenas(2, environ={}) == 2


def test_an_operators_malloc_arena_max_is_left_alone() -> None:
    assert limit_arenas(2, environ={"MALLOC_ARENA_MAX": "8"}) is None


@pytest.mark.skipif(not GLIBC, reason="mallopt(M_MMAP_THRESHOLD) is glibc's")
def test_glibc_takes_the_fixed_mmap_threshold() -> None:
    assert fix_mmap_threshold(128 * 1024, environ={}) == 128 * 1024


def test_an_operators_mmap_threshold_is_left_alone() -> None:
    assert fix_mmap_threshold(128 * 1024, environ={"MALLOC_MMAP_THRESHOLD_": "65536"}) is None
