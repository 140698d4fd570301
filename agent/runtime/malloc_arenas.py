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

With two arenas the heap itself still crept (+5.4 MiB/h over 30 minutes), all of
it in free chunks malloc kept (``bench/soak.py``'s split of RSS by kind of memory):
glibc raises its mmap threshold each time it frees an mmapped chunk, up to 32 MiB,
after which large, short-lived buffers are carved from the heap and leave holes
that are reused only in part.  :func:`fix_mmap_threshold` pins the threshold at
glibc's own starting value (128 KiB), which also stops the trim threshold from
moving: RSS was flat from the 12th minute on in the same soak
(docs/performance.md).  ``MALLOC_MMAP_THRESHOLD_``, when set, is left alone.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Mapping

#: mallopt's parameter numbers (glibc's malloc.h)
M_ARENA_MAX = -8
M_MMAP_THRESHOLD = -3
DEFAULT_ARENAS = 2
#: glibc's initial mmap threshold: chunks this large or larger are mmapped, and given back when freed
DEFAULT_MMAP_THRESHOLD = 128 * 1024


def limit_arenas(arenas: int = DEFAULT_ARENAS, environ: Mapping[str, str] = os.environ) -> int | None:
    """Limit this process's malloc arenas to ``arenas`` (threads that allocate later share them).

    Returns the limit set, or None where nothing was done: not Linux, a C library
    without ``mallopt`` or refusing the parameter (musl), or ``MALLOC_ARENA_MAX`` set.
    """
    return _mallopt(M_ARENA_MAX, arenas, "MALLOC_ARENA_MAX", environ)


def fix_mmap_threshold(
    threshold: int = DEFAULT_MMAP_THRESHOLD, environ: Mapping[str, str] = os.environ
) -> int | None:
    """Pin glibc's mmap threshold at ``threshold`` bytes (module docstring); the value set, or None where
    nothing was done (not glibc's ``mallopt``, or ``MALLOC_MMAP_THRESHOLD_`` set by the operator)."""
    return _mallopt(M_MMAP_THRESHOLD, threshold, "MALLOC_MMAP_THRESHOLD_", environ)


def _mallopt(param: int, value: int, variable: str, environ: Mapping[str, str]) -> int | None:
    if not sys.platform.startswith("linux") or variable in environ:
        return None
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return value if mallopt(param, value) == 1 else None
