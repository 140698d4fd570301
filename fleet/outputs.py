"""The job's four tables, built and written the same way by both engines.

Both engines (Spark's Python workers, :mod:`rackplan.fleet.local`) hand the
figure rows of one (``cluster_id``, ``snapshot_date``) to :func:`write_partition`,
which derives ``assignors``, ``scenarios`` and ``clusters`` from them, orders
every table by its key and writes one Parquet file per table with pyarrow.
Nothing here depends on the order the rows arrived in, on how Spark
partitioned them or on which engine ran: the same figures give the same
bytes (``tests/fleet/test_engines.py`` compares the files of both engines).

Needs pyarrow only (no Spark, no pandas).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import date
from typing import Any, Protocol

from . import units
from .intake import parse_taken_at
from .scenarios import BASELINE

TABLES = ("locality", "assignors", "scenarios", "clusters")
#: version of the tables' layout; 2: partitioned by cluster_id/snapshot_date, run_id, typed taken_at
SCHEMA_VERSION = 2
PARTITION_COLUMNS = ("cluster_id", "snapshot_date")
PLAN_COLUMNS = ("instance", "plan", "settled_instance", "settled_plan")
#: the folder name of a null partition value (Hive's and Spark's)
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
#: one file per table and (cluster, date) folder
FILE_NAME = "part-00000.parquet"

_FIGURES = [c for c, _ in units.COMPARED]
_DELTAS = ("cross_nearest", "cross_leader", "cost_nearest_usd_month", "cost_leader_usd_month")
_GROUP_KEY = ("taken_at", "kind", "group")
_RUN: tuple[tuple[str, str], ...] = (("run_id", "string"), ("schema_version", "int"))
_TYPES = dict(units.RESULT_COLUMNS + units.COMPARISON_COLUMNS)


def _typed(names: Iterable[str]) -> list[tuple[str, str]]:
    return [(n, _TYPES[n]) for n in names]


def locality_columns(keep_plans: bool) -> list[tuple[str, str]]:
    """``locality``: every result column but the partition columns (plans only when kept)."""
    names = [c for c, _ in units.RESULT_COLUMNS if c != "cluster_id"]
    if not keep_plans:
        names = [c for c in names if c not in PLAN_COLUMNS]
    return [*_typed(names), *_RUN]


ASSIGNOR_COLUMNS: list[tuple[str, str]] = [
    *_typed([*_GROUP_KEY, "scenario", "assignor", "registered", "reference_assignor", "fetch_mode", "pairs"]),
    *_typed(_FIGURES),
    *_typed(f"ref_{c}" for c in _FIGURES),
    *((f"saved_{c}", _TYPES[c]) for c in _DELTAS),
    *_RUN,
]
SCENARIO_COLUMNS: list[tuple[str, str]] = [
    *_typed([*_GROUP_KEY, "scenario", "assignor", "registered", "fetch_mode", "status", "detail"]),
    *_typed(["offline_partitions", *_FIGURES]),
    *_typed(f"base_{c}" for c in _FIGURES),
    *((f"delta_{c}", _TYPES[c]) for c in _DELTAS),
    *_RUN,
]
#: summed per (cluster, taken_at, scenario, assignor) over the ok units
CLUSTER_SUMS: tuple[str, ...] = (
    "partitions",
    "pairs",
    "pairs_with_traffic",
    "bytes_per_s",
    *(c for c in _FIGURES if c != "max_minus_min"),  # a balance: no sum of it means anything
    "offline_partitions",
)
CLUSTER_COLUMNS: list[tuple[str, str]] = [
    ("taken_at", "string"),
    ("scenario", "string"),
    ("assignor", "string"),
    *_RUN,
    ("groups", "long"),
    *_typed(CLUSTER_SUMS),
]


# ---- values --------------------------------------------------------------------------


def snapshot_date(taken_at: str | None) -> str | None:
    """The partition a unit's rows go to: the UTC date of ``taken_at`` (None: not parsable)."""
    t = parse_taken_at(taken_at)
    return None if t is None else t.date().isoformat()


# Spark's (Hive's) escaping of partition values in folder names: ``%XX`` for these characters, and NUL
# (which Hive leaves as is and no file system takes in a name).
_ESCAPED = frozenset(chr(c) for c in range(32)) | frozenset("\"#%'*/:=?\\\x7f{[]^")


def partition_folder(name: str, value: str | None) -> str:
    """``name=value`` as Hive writes it (pyarrow's hive partitioning decodes it back)."""
    if value is None or value == "":
        return f"{name}={NULL_PARTITION}"
    return f"{name}=" + "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def _key(r: Mapping[str, Any], names: Sequence[str]) -> tuple[str, ...]:
    return tuple("" if r.get(n) is None else str(r.get(n)) for n in names)


def ordered(rows: Iterable[dict[str, Any]], names: Sequence[str]) -> list[dict[str, Any]]:
    """Rows sorted by ``names``, rows with equal keys by their whole content: one order, whatever order
    they came in."""
    out = sorted(rows, key=lambda r: _key(r, names))
    i = 0
    while i < len(out):
        j = i + 1
        while j < len(out) and _key(out[j], names) == _key(out[i], names):
            j += 1
        if j - i > 1:
            out[i:j] = sorted(out[i:j], key=lambda r: json.dumps(r, sort_keys=True, default=str))
        i = j
    return out


def _minus(a: Any, b: Any) -> Any:
    return None if a is None or b is None else a - b


# ---- the tables of one (cluster, date) ----------------------------------------------------

_UNIT_KEY = ("taken_at", "kind", "group", "scenario", "assignor")


def table_rows(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The four tables' rows (before the run columns) from the figure rows of one (cluster, date),
    each with the comparisons of :func:`units.with_comparisons`."""
    loc = ordered((dict(r) for r in rows), _UNIT_KEY)
    assignors = [
        {**r, **{f"saved_{c}": _minus(r.get(c), r.get(f"ref_{c}")) for c in _DELTAS}}
        for r in loc
        if r.get("status") == units.OK and r.get("reference_assignor") is not None
    ]
    scenarios = [
        {**r, **{f"delta_{c}": _minus(r.get(c), r.get(f"base_{c}")) for c in _DELTAS}}
        for r in loc
        if r.get("scenario") not in (BASELINE, "", None)  # "": a bad snapshot's row
    ]
    sums: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for r in loc:
        if r.get("status") != units.OK:
            continue
        for assignor in (r["assignor"], "registered") if r.get("registered") else (r["assignor"],):
            sums.setdefault((str(r["taken_at"]), str(r["scenario"]), str(assignor)), []).append(r)
    clusters = []
    for (taken_at, scenario, assignor), group in sorted(sums.items()):
        row: dict[str, Any] = {"taken_at": taken_at, "scenario": scenario, "assignor": assignor}
        row["groups"] = len(group)
        for c in CLUSTER_SUMS:
            values = [g[c] for g in group if g.get(c) is not None]
            # math.fsum: the exactly rounded sum, so the same bits whatever the order
            row[c] = (math.fsum(values) if _TYPES[c] == "double" else sum(values)) if values else None
        clusters.append(row)
    return {"locality": loc, "assignors": assignors, "scenarios": scenarios, "clusters": clusters}


class FileSystem(Protocol):
    """What is written through: a pyarrow file system (local, S3, GCS, HDFS)."""

    def create_dir(self, path: str, *, recursive: bool = True) -> None: ...
    def open_output_stream(self, path: str) -> Any: ...


_ARROW = {"string": "string", "boolean": "bool_", "long": "int64", "double": "float64", "int": "int32"}


def arrow_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> Any:
    """Rows as an Arrow table of ``columns`` (``taken_at``: a UTC timestamp in microseconds)."""
    import pyarrow as pa  # type: ignore[import-untyped,import-not-found,unused-ignore]

    fields = [
        pa.field(n, pa.timestamp("us", tz="UTC") if n == "taken_at" else getattr(pa, _ARROW[k])())
        for n, k in columns
    ]
    data = {n: [parse_taken_at(r.get(n)) if n == "taken_at" else r.get(n) for r in rows] for n, _ in columns}
    return pa.Table.from_pydict(data, schema=pa.schema(fields))


def write_partition(
    fs: FileSystem,
    root: str,
    cluster_id: str | None,
    day: str | date | None,
    rows: Sequence[Mapping[str, Any]],
    run_id: str,
    keep_plans: bool,
) -> None:
    """Write the four tables of one (cluster, date) under ``root`` (``<table>/cluster_id=../snapshot_date=..``)."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped,import-not-found,unused-ignore]

    run = {"run_id": run_id, "schema_version": SCHEMA_VERSION}
    columns = {
        "locality": locality_columns(keep_plans),
        "assignors": ASSIGNOR_COLUMNS,
        "scenarios": SCENARIO_COLUMNS,
        "clusters": CLUSTER_COLUMNS,
    }
    folder = "/".join(
        (
            partition_folder("cluster_id", cluster_id),
            partition_folder("snapshot_date", str(day or "") or None),
        )
    )
    for name, table_rows_ in table_rows(rows).items():
        if not table_rows_:
            continue  # as Spark writes: no rows, no folder
        table = arrow_table([{**r, **run} for r in table_rows_], columns[name])
        path = f"{root.rstrip('/')}/{name}/{folder}"
        fs.create_dir(path, recursive=True)
        with fs.open_output_stream(f"{path}/{FILE_NAME}") as out:
            pq.write_table(table, out, compression="snappy", write_statistics=True)


def make_dirs(root: str) -> None:
    """Every table's folder under ``root`` (a local path or URI), so a table without rows is an empty
    table, not a missing one."""
    from .storage import filesystem

    fs, path = filesystem(root)
    for name in TABLES:
        fs.create_dir(f"{path.rstrip('/')}/{name}", recursive=True)


def status_counts(rows: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, float]]:
    """(units, summed ``elapsed_ms``) per status."""
    out: dict[str, tuple[int, float]] = {}
    for r in rows:
        n, ms = out.get(str(r["status"]), (0, 0.0))
        out[str(r["status"])] = (n + 1, ms + float(r.get("elapsed_ms") or 0.0))
    return out
