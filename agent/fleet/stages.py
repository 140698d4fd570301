"""The Python side of the job's stages: what runs inside Spark's Python workers.

Kept apart from :mod:`agent.fleet.job` so that these functions are pickled by
reference to an importable module even when the job runs as ``__main__``
(``spark-submit agent/fleet/job.py``, ``python -m agent.fleet.job``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from . import units
from .scenarios import Scenario, parse_scenarios

_PANDAS_DTYPES = {"string": "string", "boolean": "boolean", "long": "Int64", "double": "Float64"}


def schema(columns: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"`{name}` {kind}" for name, kind in columns)


def frame(rows: list[dict[str, Any]], columns: Sequence[tuple[str, str]]) -> Any:
    """Rows as a pandas frame with nullable dtypes, so null figures stay null in Arrow."""
    import pandas as pd  # type: ignore[import-untyped,import-not-found,unused-ignore]

    frame = pd.DataFrame.from_records(rows, columns=[n for n, _ in columns])
    return frame.astype({n: _PANDAS_DTYPES[k] for n, k in columns})


def map_rows(fn: Callable[[dict[str, Any]], list[dict[str, Any]]], columns: Sequence[tuple[str, str]]) -> Any:
    """A ``mapInPandas`` function applying ``fn`` to every input row."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            rows = [r for record in batch.to_dict("records") for r in fn(record)]
            if rows:
                yield frame(rows, columns)

    return run


def groups_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    return units.group_rows(record["value"], record["source"])


@functools.lru_cache(maxsize=4)
def parsed(scenarios: str) -> list[Scenario]:
    return parse_scenarios(json.loads(scenarios))


@dataclass(frozen=True)
class Expand:
    scenarios: str  # JSON: parsed once per Python worker
    consumer_assignors: tuple[str, ...]
    strategies: tuple[str, ...]

    def __call__(self, record: dict[str, Any]) -> list[dict[str, Any]]:
        return units.unit_rows(record, parsed(self.scenarios), self.consumer_assignors, self.strategies)


@dataclass(frozen=True)
class Evaluate:
    price_per_gb: float
    keep_plans: bool

    def __call__(self, record: dict[str, Any]) -> list[dict[str, Any]]:
        return [units.evaluate(record, self.price_per_gb, self.keep_plans)]
