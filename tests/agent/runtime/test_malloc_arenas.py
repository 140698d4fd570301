"""The agent bounds glibc's malloc arenas (its RSS crept up under churn without), unless the operator chose."""

from __future__ import annotations

import platform
import sys

import pytest

from rackplan.agent.runtime.malloc_arenas import limit_arenas

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="mallopt(M_ARENA_MAX) is glibc's")
def test_glibc_takes_the_limit() -> None:
    assert limit_arenas(2, environ={}) == 2


def test_an_operators_malloc_arena_max_is_left_alone() -> None:
    assert limit_arenas(2, environ={"MALLOC_ARENA_MAX": "8"}) is None
