"""Bound glibc's malloc arenas in the agent's process: unbounded, its resident memory creeps up under churn.

glibc gives a thread that allocates while another holds an arena an arena of
its own, up to eight per core, and keeps their freed pages.  librdkafka runs a
few threads per client and per broker (the agent has several clients), so a
long-running agent spreads its short-lived allocations (records, futures,
metadata) over many arenas.  Measured with ``bench/soak.py`` (15 minutes of
churn, docs/performance.md): RSS still rose about 1 MiB every few minutes at
the end with glibc's default, and stayed within 0.1 MiB over the last six
minutes with two arenas, at the same cycle count.  ``MALLOC_ARENA_MAX``, when
set, is the operator's choice: glibc read it at start and it is left alone.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Mapping

#: mallopt's parameter number for the arena limit (glibc's malloc.h)
M_ARENA_MAX = -8
DEFAULT_ARENAS = 2


def limit_arenas(arenas: int = DEFAULT_ARENAS, environ: Mapping[str, str] = os.environ) -> int | None:
    """Limit this process's malloc arenas to ``arenas`` (threads that allocate later share them).

    Returns the limit set, or None where nothing was done: not Linux, a C library
    without ``mallopt`` or refusing the parameter (musl), or ``MALLOC_ARENA_MAX`` set.
    """
    if not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in environ:
        return None
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return arenas if mallopt(M_ARENA_MAX, arenas) == 1 else None
