"""Progress of a fleet run as structlog events, true from the first second.

Two events (logger ``rackplan.fleet``):

* ``fleet.phase`` when a phase starts (``starting Spark``, ``reading``,
  ``planning``, ``writing``, ``commit``, ``done``), at once: nothing is
  counted before there is something to count;
* ``fleet.progress`` every ``interval`` seconds while a counted phase runs,
  and when it ends: ``done``/``total`` units, ``units_per_s`` and ``eta_s``
  from the units completed so far in the phase (``eta_s`` null until the
  first completes: unknown, not zero).  ``done`` never goes back and never
  exceeds ``total``.

The in-process engine counts each group's units as they are planned
(:meth:`Progress.advance`); Spark's counter is an accumulator that grows as
its tasks end (``counter``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol


class Log(Protocol):
    def __call__(self, event: str, **fields: Any) -> None: ...


def structlog_info() -> Log:
    import structlog

    logger = structlog.get_logger("rackplan.fleet")

    def log(event: str, **fields: Any) -> None:
        logger.info(event, **fields)

    return log


class Progress:
    """Phase events at once, counted progress every ``interval`` seconds (0: phase events only)."""

    def __init__(self, interval: float, log: Log | None = None) -> None:
        self._interval = interval
        self._log = log or structlog_info()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._start = time.monotonic()
        self.phase = "starting"
        self._phase_start = self._start
        self._total = 0
        self._done = 0
        self._counter: Callable[[], int] | None = None
        self._then: str | None = None

    def set_phase(
        self, name: str, total: int = 0, counter: Callable[[], int] | None = None, then: str | None = None
    ) -> None:
        """Start a phase; ``total`` > 0: it counts units (``counter``, or :meth:`advance`); ``then``:
        the phase that follows once every unit is counted (Spark's writes, in the same job)."""
        if self._total:
            self.report()  # the counted phase's final count
        with self._lock:
            self.phase, self._total, self._counter, self._done, self._then = name, total, counter, 0, then
            self._phase_start = time.monotonic()
        self._log("fleet.phase", phase=name, total_units=total or None, elapsed_s=self._elapsed())

    def advance(self, n: int) -> None:
        """``n`` more units done (the in-process engine, as each group is planned)."""
        with self._lock:
            self._done = min(self._total, self._done + n) if self._total else self._done

    def _elapsed(self) -> float:
        return round(time.monotonic() - self._start, 1)

    def fields(self) -> dict[str, Any]:
        """The counted phase's state: done, total, rate and ETA from real completions."""
        with self._lock:
            if self._counter is not None:
                self._done = max(self._done, min(self._total, int(self._counter())))
            done, total, in_phase = self._done, self._total, time.monotonic() - self._phase_start
        rate = done / in_phase if in_phase > 0 else 0.0
        return {
            "phase": self.phase,
            "done": done,
            "total": total,
            "percent": round(100 * done / total, 1) if total else None,
            "units_per_s": round(rate, 1),
            "eta_s": round((total - done) / rate, 1) if rate > 0 else None,
            "elapsed_s": self._elapsed(),
        }

    def report(self) -> None:
        if not self._total:
            return
        f = self.fields()
        self._log("fleet.progress", **f)
        if self._then is not None and f["done"] >= f["total"]:
            then, self._then = self._then, None
            self.set_phase(then)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.report()

    def __enter__(self) -> Progress:
        if self._interval > 0:
            self._thread = threading.Thread(target=self._run, name="fleet-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
