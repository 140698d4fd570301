"""Measurement helpers shared by the bench scripts, so "median", "CPU" and "peak" mean the same in every table.

Wall time is ``time.perf_counter``, CPU time ``time.process_time`` (robust to
other load on the machine), both as medians over repeats; peak memory is
``tracemalloc``'s peak over one extra call (tracing slows the call, so it is
never timed).  Baselines that may not finish run in a forked child with a
timeout.
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import statistics
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Timing(Generic[T]):
    """Median wall-clock and CPU seconds over the repeats, and what the last call returned."""

    wall: float
    cpu: float
    result: T


def timed(fn: Callable[[], T], repeats: int) -> Timing[T]:
    """Call ``fn`` ``repeats`` times (at least once) and take the medians."""
    wall, cpu, result = _once(fn)
    walls, cpus = [wall], [cpu]
    for _ in range(repeats - 1):
        wall, cpu, result = _once(fn)
        walls.append(wall)
        cpus.append(cpu)
    return Timing(statistics.median(walls), statistics.median(cpus), result)


def _once(fn: Callable[[], T]) -> tuple[float, float, T]:
    start, start_cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - start, time.process_time() - start_cpu, result


def peak_memory(fn: Callable[[], object]) -> int:
    """Peak bytes ``tracemalloc`` sees during one call of ``fn``."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far, in MiB (Linux reports ``ru_maxrss`` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10


def _put_result(fn: Callable[..., Any], args: tuple[Any, ...], out: Any) -> None:
    out.put(fn(*args))


def in_child(fn: Callable[..., T], args: tuple[Any, ...], timeout: float) -> T | None:
    """``fn(*args)`` computed in a forked child process; None if it does not finish within ``timeout`` seconds.

    The result must be small (it travels through a pipe).
    """
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    proc = ctx.Process(target=_put_result, args=(fn, args, out))
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.terminate()
        proc.join()
        return None
    result: T | None = out.get() if not out.empty() else None
    return result
