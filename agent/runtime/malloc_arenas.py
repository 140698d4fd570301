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

Two arenas still kept freed pages: over half an hour of the same churn the bytes
malloc's callers held stayed at 22.4 MiB (``mallinfo2``) while the free chunks
malloc kept grew from 7.6 to 10.6 MiB and RSS rose in steps with them.  Not a
leak, the allocator's retention: :func:`start_heap_trimmer` hands free pages back
(``malloc_trim(0)``) once a minute, on a thread of its own (docs/performance.md,
"Memory under churn").
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Callable, Mapping

#: mallopt's parameter number for the arena limit (glibc's malloc.h)
M_ARENA_MAX = -8
DEFAULT_ARENAS = 2
#: how often the heap trimmer hands malloc's free pages back to the kernel
TRIM_EVERY_S = 60.0


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


def malloc_trim() -> Callable[[], bool] | None:
    """glibc's ``malloc_trim(0)`` (every arena's free pages back to the kernel; True when some were), or None
    where the C library has none (not Linux, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return lambda: fn(0) == 1


class HeapTrimmer:
    """Calls ``trim`` every ``every_s`` on a daemon thread until :meth:`stop` (cheap: a walk over the arenas'
    free chunks, under malloc's own locks, so any thread may call it)."""

    def __init__(self, trim: Callable[[], bool], every_s: float = TRIM_EVERY_S) -> None:
        self._trim = trim
        self._every_s = every_s
        self._stopped = threading.Event()
        self.trims = 0
        self._thread = threading.Thread(target=self._run, name="rackplan-heap-trim", daemon=True)

    def start(self) -> HeapTrimmer:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stopped.wait(self._every_s):
            self._trim()
            self.trims += 1

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()


def start_heap_trimmer(every_s: float = TRIM_EVERY_S) -> HeapTrimmer | None:
    """Start trimming this process's heap every ``every_s`` seconds; None where malloc cannot be trimmed."""
    trim = malloc_trim()
    return None if trim is None else HeapTrimmer(trim, every_s).start()
