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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from . import units
from .scenarios import Scenario, parse_scenarios

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
class GroupsOf:
    """Stage 1: snapshot documents -> one row per group or app of the documents to evaluate.

    ``keep``: the digests (``xxhash64`` of the text) of the documents chosen on
    the driver (the newest of each cluster, one per (cluster, taken_at));
    None keeps every one.  A document that does not parse is always
    reported (an ``invalid`` row), whatever its age.
    """

    keep: frozenset[int] | None

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        return profiled("groups", self._run, batches)

    def _run(self, batches: Iterator[Any]) -> Iterator[Any]:
        seen: set[int] = set()  # identical lines of one archive: once
        for b in batches:
            rows: list[dict[str, Any]] = []
            for rec in b.to_pylist():
                digest = int(rec["digest"])
                groups = units.group_rows(rec["value"], rec["source"])
                bad = len(groups) == 1 and groups[0]["kind"] == "snapshot"
                if not bad and (digest in seen or (self.keep is not None and digest not in self.keep)):
                    continue
                seen.add(digest)
                rows.extend(groups)
            if rows:
                yield batch(rows, units.GROUP_COLUMNS)


#: what stage 2 returns: the figures, then the reference's and the baseline's (:func:`units.with_comparisons`)
EVALUATED_COLUMNS = units.RESULT_COLUMNS + units.COMPARISON_COLUMNS


@dataclass(frozen=True)
class EvaluateGroups:
    """Stage 2, in one pass per group: every (scenario, assignor) unit of the group evaluated
    with ``rackplan assign``; only figures leave the worker (plans too with ``keep_plans``),
    each beside the reference assignor's and the baseline's figures of the same group.

    ``counter``: an accumulator-like object (``add(n)``) counting units, for progress.
    """

    scenarios: str  # JSON: parsed once per Python worker
    price_per_gb: float
    keep_plans: bool
    consumer_assignors: tuple[str, ...]
    strategies: tuple[str, ...]
    counter: Any = None

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        return profiled("units", self._run, batches)

    def _run(self, batches: Iterator[Any]) -> Iterator[Any]:
        scenarios = parsed(self.scenarios)
        for b in batches:
            rows: list[dict[str, Any]] = []
            for group in b.to_pylist():
                rows.extend(
                    units.with_comparisons(
                        units.group_results(
                            group,
                            scenarios,
                            self.price_per_gb,
                            self.keep_plans,
                            self.consumer_assignors,
                            self.strategies,
                        )
                    )
                )
            if self.counter is not None:
                self.counter.add(len(rows))
            if rows:
                yield batch(rows, EVALUATED_COLUMNS)
