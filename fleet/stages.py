"""The Python side of the job's stages: what runs inside Spark's Python workers.

Kept apart from :mod:`rackplan.fleet.job` so that these functions are pickled by
reference to an importable module even when the job runs as ``__main__``
(``spark-submit fleet/job.py``, ``python -m rackplan.fleet.job``).

Both stages are ``mapInArrow`` functions: Arrow record batches in, Arrow
record batches out, no pandas on the way (rows are plain dicts).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .settings import FleetOptions

from . import units
from .documents import LISTING_COLUMNS, Documents, groups_of, listing
from .outputs import snapshot_date, status_counts, write_partition
from .scenarios import Scenario, parse_scenarios, scenarios_json

_ARROW_TYPES = {"string": "string", "boolean": "bool_", "long": "int64", "double": "float64"}


def schema(columns: Sequence[tuple[str, str]]) -> str:
    """Spark DDL of a column list."""
    return ", ".join(f"`{name}` {kind}" for name, kind in columns)


@functools.lru_cache(maxsize=8)
def arrow_schema(columns: tuple[tuple[str, str], ...]) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped,import-not-found,unused-ignore]

    return pa.schema([(name, getattr(pa, _ARROW_TYPES[kind])()) for name, kind in columns])


def batch(rows: list[dict[str, Any]], columns: tuple[tuple[str, str], ...]) -> Any:
    """Rows as one Arrow record batch of ``columns`` (missing keys: null)."""
    import pyarrow as pa  # type: ignore[import-untyped,import-not-found,unused-ignore]

    return pa.RecordBatch.from_pylist(rows, schema=arrow_schema(columns))


#: a folder: every task of a stage dumps a cProfile of its Python side there (``<stage>-<partition>-<pid>.prof``)
PROFILE_ENV = "RACKPLAN_FLEET_PROFILE"


def profiled(
    stage: str, run: Callable[[Iterator[Any]], Iterator[Any]], batches: Iterator[Any]
) -> Iterator[Any]:
    """``run(batches)``, under cProfile when ``RACKPLAN_FLEET_PROFILE`` names a folder.

    The profile covers the whole task as the Python worker sees it: reading
    Arrow batches, the stage's own work and building the output batches
    (the worker's writes of them to the JVM happen while the generator is
    suspended, and count too: the profiler stays on between ``next`` calls).
    """
    folder = os.environ.get(PROFILE_ENV)
    if not folder:
        yield from run(batches)
        return
    import cProfile

    try:
        from pyspark import TaskContext  # type: ignore[import-not-found,unused-ignore]

        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx is not None else -1
    except ImportError:
        part = -1
    prof = cProfile.Profile()
    prof.enable()
    try:
        yield from run(batches)
    finally:
        prof.disable()
        os.makedirs(folder, exist_ok=True)
        prof.dump_stats(os.path.join(folder, f"{stage}-{part}-{os.getpid()}.prof"))


@functools.lru_cache(maxsize=4)
def parsed(scenarios: str) -> list[Scenario]:
    """Scenarios from their JSON, parsed once per Python worker."""
    return parse_scenarios(json.loads(scenarios))


@dataclass(frozen=True)
class ListDocuments:
    """The reading pass: one :func:`rackplan.fleet.documents.listing` row per document (the document
    parsed as the group rows parse it: both engines count and choose from the same rows)."""

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        return profiled("list", self._run, batches)

    def _run(self, batches: Iterator[Any]) -> Iterator[Any]:
        for b in batches:
            rows = [listing(r["value"], r["source"]) for r in b.to_pylist()]
            if rows:
                yield batch(rows, LISTING_COLUMNS)


@dataclass(frozen=True)
class GroupsOf:
    """Stage 1: snapshot documents -> one row per group or app of the documents to evaluate
    (:func:`rackplan.fleet.documents.groups_of`; ``keep``: the digests chosen on the driver)."""

    keep: frozenset[str] | None

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        return profiled("groups", self._run, batches)

    def _run(self, batches: Iterator[Any]) -> Iterator[Any]:
        seen: set[str] = set()  # identical lines of one archive: once
        for b in batches:
            rows = list(groups_of(b.to_pylist(), self.keep, seen))
            if rows:
                yield batch(rows, units.GROUP_COLUMNS)


#: what stage 2 returns: the figures, the reference's and the baseline's (:func:`units.with_comparisons`),
#: and the partition the rows are written to
EVALUATED_COLUMNS = (*units.RESULT_COLUMNS, *units.COMPARISON_COLUMNS, ("snapshot_date", "string"))


@dataclass(frozen=True)
class Evaluation:
    """What every unit of a run is evaluated with (both engines)."""

    scenarios: str  # JSON: parsed once per Python worker
    price_per_gb: float
    keep_plans: bool
    consumer_assignors: tuple[str, ...]
    strategies: tuple[str, ...]
    #: False: ``elapsed_ms`` is null, so the outputs depend on the input alone
    unit_timings: bool = True

    @classmethod
    def of(cls, scenarios: Sequence[Scenario], options: FleetOptions) -> Evaluation:
        return cls(
            json.dumps(scenarios_json(scenarios)),
            options.price_per_gb,
            options.keep_plans,
            tuple(options.consumer_assignors),
            tuple(options.streams_strategies),
            options.unit_timings,
        )

    def units(self, chosen: Documents) -> int:
        """The units of the chosen documents, exactly: scenarios x assignors of each consumer group,
        scenarios x rack strategies of each Streams app, one per bad document (:meth:`Documents.units`)."""
        return chosen.units(len(parsed(self.scenarios)), len(self.consumer_assignors), len(self.strategies))

    def group(self, group: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Every (scenario, assignor) unit of one group row, with its comparisons and its partition."""
        rows = units.with_comparisons(
            units.group_results(
                group,
                parsed(self.scenarios),
                self.price_per_gb,
                self.keep_plans,
                self.consumer_assignors,
                self.strategies,
            )
        )
        for r in rows:
            r["snapshot_date"] = snapshot_date(r.get("taken_at"))
            if not self.unit_timings:
                r["elapsed_ms"] = None
        return rows


@dataclass(frozen=True)
class EvaluateGroups:
    """Stage 2, in one pass per group: every (scenario, assignor) unit of the group evaluated
    with ``rackplan assign`` (:meth:`Evaluation.group`); only figures leave the worker (plans too
    with ``keep_plans``).

    ``counter``: an accumulator-like object (``add(n)``) counting units, for progress.
    """

    evaluation: Evaluation
    counter: Any = None

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        return profiled("units", self._run, batches)

    def _run(self, batches: Iterator[Any]) -> Iterator[Any]:
        for b in batches:
            rows: list[dict[str, Any]] = []
            for group in b.to_pylist():
                rows.extend(self.evaluation.group(group))
            if self.counter is not None:
                self.counter.add(len(rows))
            if rows:
                yield batch(rows, EVALUATED_COLUMNS)


#: what the write pass returns to the driver: units and summed ``elapsed_ms`` per status
WRITTEN_COLUMNS: tuple[tuple[str, str], ...] = (("status", "string"), ("n", "long"), ("ms", "double"))


@dataclass(frozen=True)
class WriteTables:
    """Stage 3: the figure rows of a Spark partition, sorted by (``cluster_id``, ``snapshot_date``),
    written as the four tables (:func:`rackplan.fleet.outputs.write_partition`) under ``root``;
    returns the counts per status."""

    root: str
    run_id: str
    keep_plans: bool

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        return profiled("write", self._run, batches)

    def _run(self, batches: Iterator[Any]) -> Iterator[Any]:
        from .storage import filesystem

        fs, root = filesystem(self.root)
        counts: dict[str, tuple[int, float]] = {}
        current: tuple[Any, Any] | None = None
        pending: list[dict[str, Any]] = []

        def flush() -> None:
            if current is not None and pending:
                write_partition(fs, root, current[0], current[1], pending, self.run_id, self.keep_plans)
                for status, (n, ms) in status_counts(pending).items():
                    had = counts.get(status, (0, 0.0))
                    counts[status] = (had[0] + n, had[1] + ms)

        for b in batches:
            for r in b.to_pylist():
                key = (r["cluster_id"], r["snapshot_date"])
                if key != current:
                    flush()
                    current, pending = key, []
                pending.append(r)
        flush()
        rows = [{"status": s, "n": n, "ms": ms} for s, (n, ms) in sorted(counts.items())]
        if rows:
            yield batch(rows, WRITTEN_COLUMNS)
