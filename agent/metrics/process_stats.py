"""This process's CPU, memory, file descriptors and start time, as Prometheus' standard ``process_*`` metrics.

Read from ``/proc/self`` at scrape time, as the official clients do, so the
agent needs no client library: one small read of ``/proc/self/stat`` and a
listing of ``/proc/self/fd`` (a few dozen microseconds).  Where ``/proc`` is
missing (not Linux) only what :mod:`resource` knows is reported: CPU time,
the file-descriptor limit and the start time recorded at import.
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from pathlib import Path

#: name -> (type, help); rendered after the agent's own metrics
PROCESS_METRICS: dict[str, tuple[str, str]] = {
    "process_cpu_seconds_total": ("counter", "Total user and system CPU time spent in seconds."),
    "process_resident_memory_bytes": ("gauge", "Resident memory size in bytes."),
    "process_virtual_memory_bytes": ("gauge", "Virtual memory size in bytes."),
    "process_start_time_seconds": ("gauge", "Start time of the process since unix epoch in seconds."),
    "process_open_fds": ("gauge", "Number of open file descriptors."),
    "process_max_fds": ("gauge", "Maximum number of open file descriptors."),
}

_PROC = Path("/proc/self")
_FALLBACK_START = time.time()  # import time: close enough to the start where /proc cannot tell


def _ticks() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - every Linux has it
        return 100


def _boot_time() -> float | None:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except OSError:
        return None
    return None  # pragma: no cover - Linux always writes btime


def _stat_fields() -> list[str] | None:
    """``/proc/self/stat`` after the command name (which may hold spaces and parentheses)."""
    try:
        raw = (_PROC / "stat").read_bytes()
    except OSError:
        return None
    return raw[raw.rindex(b")") + 2 :].decode().split()


def _start_time(fields: list[str] | None) -> float:
    boot = _boot_time()
    if fields is None or boot is None:
        return _FALLBACK_START
    # field 22 of stat(5), the 20th after the name: start time in clock ticks since boot
    return boot + int(fields[19]) / _TICKS


_TICKS = _ticks()
_PAGE = resource.getpagesize()
#: constant for the life of the process: computed once
START_TIME_S = _start_time(_stat_fields())


def process_values() -> dict[str, float]:
    """Current values of :data:`PROCESS_METRICS` (only those this platform can tell)."""
    out: dict[str, float] = {}
    fields = _stat_fields()
    if fields is not None:
        # stat(5) fields 14, 15 (utime, stime), 23 (vsize, bytes), 24 (rss, pages): 12th, 13th, 21st, 22nd after the name
        out["process_cpu_seconds_total"] = (int(fields[11]) + int(fields[12])) / _TICKS
        out["process_resident_memory_bytes"] = float(int(fields[21]) * _PAGE)
        out["process_virtual_memory_bytes"] = float(int(fields[20]))
    else:  # pragma: no cover - not Linux
        ru = resource.getrusage(resource.RUSAGE_SELF)
        out["process_cpu_seconds_total"] = ru.ru_utime + ru.ru_stime
    out["process_start_time_seconds"] = START_TIME_S
    with contextlib.suppress(OSError):  # no /proc: not Linux
        out["process_open_fds"] = float(len(os.listdir(_PROC / "fd")))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft != resource.RLIM_INFINITY:
        out["process_max_fds"] = float(soft)
    return out
