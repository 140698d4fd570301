"""What a run leaves behind, whichever engine ran it: its id, its summary, its atomic commit."""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .outputs import PARTITION_COLUMNS, SCHEMA_VERSION, TABLES
from .progress import Progress
from .storage import Store

if TYPE_CHECKING:
    from .documents import Documents
    from .scenarios import Scenario
    from .settings import FleetOptions


@dataclass
class Summary:
    out: str
    run_id: str
    elapsed_s: float
    statuses: dict[str, int]
    scenarios: list[str]
    settings: dict[str, Any]
    snapshots: list[str] = field(default_factory=list)
    documents: int = 0
    partitions: int = 0
    timings_s: dict[str, float] = field(default_factory=dict)
    assign_ms: float = 0.0
    engine: str = "spark"

    @property
    def units(self) -> int:
        return sum(self.statuses.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "out": self.out,
            "run_id": self.run_id,
            "schema_version": SCHEMA_VERSION,
            "engine": self.engine,
            "elapsed_s": round(self.elapsed_s, 3),
            "units": self.units,
            "statuses": self.statuses,
            "scenarios": self.scenarios,
            "snapshots": self.snapshots,
            "documents": self.documents,
            "partitions": self.partitions,
            "timings_s": {k: round(v, 3) for k, v in self.timings_s.items()},
            "assign_cpu_s": round(self.assign_ms / 1000.0, 3),
            "tables": list(TABLES),
            "partitioned_by": list(PARTITION_COLUMNS),
            "settings": self.settings,
        }


class Phases:
    """A run's phases: each timed (``timings``, under its short ``key``) and announced to ``progress``."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.timings: dict[str, float] = {}
        self.start = self._mark = time.monotonic()
        self._current = ""

    def begin(self, name: str, key: str, total: int = 0, announce: bool = True, **counted: Any) -> None:
        """End the current phase, start ``name`` (``total`` units; ``counted``: Progress's ``counter``
        and ``then``); ``announce`` False: time it without an event (the caller announced it)."""
        now = time.monotonic()
        if self._current:
            self.timings[self._current] = now - self._mark
        self._mark, self._current = now, key
        if self.progress is not None and announce:
            self.progress.set_phase(name, total, **counted)


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


#: options that change nothing in the tables (how and where the run goes, how it reports)
_NOT_IN_TABLES = frozenset({"engine", "local_max_units", "progress_interval_s"})


def run_id_of(chosen: Documents, scenarios: Sequence[Scenario], options: FleetOptions, run_id: str) -> str:
    """The ``run_id`` the tables and ``summary.json`` carry: ``run_id`` (a time and a random suffix, or the
    caller's) when units are timed; with ``fleet.unit_timings`` off, ``input-`` and 16 hex digits of the
    sha256 of the input (every document's source and digest, the scenarios, the options that shape the
    tables), so that the tables are the same bytes on every run of the same input, on either engine."""
    if options.unit_timings:
        return run_id
    from .scenarios import scenarios_json

    shaping = {k: v for k, v in options.model_dump(mode="json").items() if k not in _NOT_IN_TABLES}
    text = json.dumps([chosen.inputs, scenarios_json(scenarios), shaping], sort_keys=True)
    return "input-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def tally(written: Iterable[Mapping[str, Any]]) -> tuple[dict[str, int], float]:
    """Units per status (sorted) and their summed ``elapsed_ms``, from the write pass's count rows."""
    statuses: dict[str, int] = {}
    assign_ms = 0.0
    for r in written:
        statuses[str(r["status"])] = statuses.get(str(r["status"]), 0) + int(r["n"])
        assign_ms += float(r["ms"] or 0.0)
    return dict(sorted(statuses.items())), assign_ms


def commit(store: Store, staging: str, out: str, run_id: str, summary_text: str) -> None:
    """Move a finished run from ``staging`` into ``out``: per table, the old one aside, the new one in
    (renames: no data copied), then summary.json, then the old tables are deleted."""
    trash = f"{out}/_replaced-{run_id}"
    for name in TABLES:
        if store.exists(f"{out}/{name}"):
            store.rename(f"{out}/{name}", f"{trash}/{name}")
        store.rename(f"{staging}/{name}", f"{out}/{name}")
    store.write_text(f"{out}/summary.json", summary_text)
    store.delete(trash)
    store.delete(staging)


def finish(summary: Summary, store: Store | None, staging: str, phases: Phases) -> Summary:
    """Commit a run (``store`` None: written in place, nothing to commit) and complete its summary:
    phase timings (``commit`` from here), elapsed time, the ``done`` event."""
    start, progress = phases.start, phases.progress
    mark = time.monotonic()
    summary.elapsed_s = mark - start
    summary.timings_s = dict(phases.timings)
    if store is not None:
        commit(store, staging, summary.out, summary.run_id, json.dumps(summary.to_json(), indent=2) + "\n")
    summary.timings_s["commit"] = time.monotonic() - mark
    summary.elapsed_s = time.monotonic() - start
    if progress is not None:
        progress.set_phase("done")
    return summary
