"""The fleet job on Spark: snapshots x scenarios x assignors -> Parquet tables.

Stages (each a ``mapInPandas`` over rows of serialized JSON, calling the pure
functions of :mod:`agent.fleet.units`)::

    snapshot files --read--> documents --groups--> one row per (cluster, group or app)
      --repartition--> one row per (cluster, group, scenario, assignor): a contract instance
      --repartition--> figures of each unit (``rackplan assign`` inside the executors)
      --> locality/ (Parquet) --> assignors/, scenarios/, clusters/ (Spark aggregations)

Snapshots and instances stay on the executors: the driver lists file names
and, at the end, collects a count per status.  Runs in ``rackplan fleet`` or
under ``spark-submit`` (``spark-submit agent/fleet/job.py --snapshots ...``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file by spark-submit: make the package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agent.fleet import units
from agent.fleet.scenarios import BASELINE, Scenario, load_scenarios, scenarios_json
from agent.fleet.settings import FleetOptions, FleetSettings, SparkSettings
from agent.fleet.snapshot import snapshot_files
from agent.fleet.stages import Evaluate, Expand, groups_of, map_rows, schema

TABLES = ("locality", "assignors", "scenarios", "clusters")
_PLAN_COLUMNS = ("instance", "plan", "settled_instance", "settled_plan")


# ---- session ---------------------------------------------------------------------


def submitted() -> bool:
    """True under ``spark-submit``: master and resources come from it, not from settings."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))


def build_session(s: SparkSettings, use_settings_master: bool = True) -> Any:
    """A SparkSession from settings; in local mode everything stays on loopback."""
    from pyspark.sql import SparkSession  # type: ignore[import-not-found,unused-ignore]

    b = SparkSession.builder.appName(s.app_name)
    if use_settings_master:
        b = b.master(s.master)
        if s.master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            b = b.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
            # Python workers must be this interpreter: it has the package and its dependencies.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            b = b.config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
        resources = {
            "spark.executor.instances": s.executor_instances,
            "spark.executor.cores": s.executor_cores,
            "spark.executor.memory": s.executor_memory,
            "spark.driver.memory": s.driver_memory,
        }
        for key, value in resources.items():
            if value is not None:
                b = b.config(key, str(value))
    b = b.config("spark.ui.enabled", "true" if s.ui else "false")
    b = b.config("spark.ui.showConsoleProgress", "false")  # our own progress line instead
    b = b.config("spark.sql.execution.arrow.maxRecordsPerBatch", str(s.arrow_batch_rows))
    if s.partitions:
        b = b.config("spark.sql.shuffle.partitions", str(s.partitions))
    for key, value in sorted(s.conf.items()):
        b = b.config(key, value)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


# ---- progress --------------------------------------------------------------------


class Progress:
    """A progress line on stderr every ``interval`` seconds, from Spark's status tracker."""

    def __init__(self, spark: Any, interval: float, write: Callable[[str], None] | None = None) -> None:
        self._tracker = spark.sparkContext.statusTracker()
        self._interval = interval
        self._write = write or (lambda line: print(line, file=sys.stderr, flush=True))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.phase = "starting"
        self._start = time.monotonic()

    def line(self) -> str:
        done = total = running = 0
        for sid in self._tracker.getActiveStageIds():
            info = self._tracker.getStageInfo(sid)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
                running += info.numActiveTasks
        elapsed = time.monotonic() - self._start
        tasks = f"{done}/{total} tasks done, {running} running" if total else "waiting for tasks"
        return f"rackplan fleet: {self.phase}: {tasks} ({elapsed:.0f} s)"

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._write(self.line())

    def __enter__(self) -> Progress:
        if self._interval > 0:
            self._thread = threading.Thread(target=self._run, name="fleet-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


# ---- stages ----------------------------------------------------------------------


def snapshot_sources(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """(whole-file documents, JSON-lines files): local paths listed here, URIs (``hdfs://``, ``s3a://``) left to Spark.

    A URI ending in ``.jsonl`` is read line by line; any other URI (a file, a
    directory or a glob) as whole ``.json`` documents.
    """
    local = [p for p in paths if "://" not in p]
    remote = [p for p in paths if "://" in p]
    files = snapshot_files(local) if local else []
    whole = [str(f) for f in files if f.suffix != ".jsonl"] + [p for p in remote if not p.endswith(".jsonl")]
    lines = [str(f) for f in files if f.suffix == ".jsonl"] + [p for p in remote if p.endswith(".jsonl")]
    if not whole and not lines:
        raise FileNotFoundError(f"no snapshot files (*.json, *.jsonl) under {', '.join(paths)}")
    return whole, lines


def read_documents(spark: Any, paths: Sequence[str]) -> Any:
    """One row (``value``, ``source``) per snapshot document; the executors read the files."""
    from pyspark.sql import functions as F  # type: ignore[import-not-found,unused-ignore]

    whole, lines = snapshot_sources(paths)
    frames = []
    source = F.col("_metadata.file_path").alias("source")  # a hidden column of file sources
    if whole:
        frames.append(spark.read.text(whole, wholetext=True).select("value", source))
    if lines:
        frames.append(spark.read.text(lines).select("value", source).where(F.trim(F.col("value")) != ""))
    return frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])


def latest_only(groups: Any) -> Any:
    """Rows of each cluster's newest snapshot (invalid-snapshot rows are kept: they are reported)."""
    from pyspark.sql import Window  # type: ignore[import-not-found,unused-ignore]
    from pyspark.sql import functions as F  # type: ignore[import-not-found,unused-ignore]

    newest = groups.withColumn("_newest", F.max("taken_at").over(Window.partitionBy("cluster_id")))
    keep = (F.col("taken_at") == F.col("_newest")) | (F.col("kind") == "snapshot")
    return newest.where(keep).drop("_newest")


def unit_frame(
    spark: Any,
    paths: Sequence[str],
    scenarios: Sequence[Scenario],
    options: FleetOptions,
    partitions: int = 0,
) -> Any:
    """The lazily computed table of figures, one row per unit (``partitions``: 0 = eight per core)."""
    partitions = partitions or max(16, 8 * spark.sparkContext.defaultParallelism)
    docs = read_documents(spark, paths)
    groups = docs.mapInPandas(map_rows(groups_of, units.GROUP_COLUMNS), schema(units.GROUP_COLUMNS))
    if options.history == "latest":
        groups = latest_only(groups)
    groups = groups.dropDuplicates(["cluster_id", "taken_at", "kind", "group"])
    expand = Expand(
        json.dumps(scenarios_json(scenarios)), options.consumer_assignors, options.streams_strategies
    )
    unit_rows = groups.repartition(partitions).mapInPandas(
        map_rows(expand, units.UNIT_COLUMNS), schema(units.UNIT_COLUMNS)
    )
    evaluate = Evaluate(options.price_per_gb, options.keep_plans)
    results = unit_rows.repartition(partitions).mapInPandas(
        map_rows(evaluate, units.RESULT_COLUMNS), schema(units.RESULT_COLUMNS)
    )
    if not options.keep_plans:
        results = results.drop(*_PLAN_COLUMNS)
    return results


# ---- derived tables ----------------------------------------------------------------

_GROUP_KEY = ["cluster_id", "taken_at", "kind", "group"]
_FIGURES = [
    "cross_nearest",
    "cross_leader",
    "cross_bytes_nearest",
    "cross_bytes_leader",
    "cost_nearest_usd_month",
    "cost_leader_usd_month",
    "moved",
    "max_minus_min",
]


def assignor_table(loc: Any) -> Any:
    """Every assignor against the reference (rack-optimal; Streams: min_traffic) on the same group and scenario.

    ``saved_*``: what switching from that assignor to the reference would save.
    """
    from pyspark.sql import functions as F  # type: ignore[import-not-found,unused-ignore]

    ok = loc.where(F.col("status") == units.OK)
    ref = ok.where(F.col("reference")).select(
        *_GROUP_KEY,
        "scenario",
        F.col("assignor").alias("reference_assignor"),
        *[F.col(c).alias(f"ref_{c}") for c in _FIGURES],
    )
    joined = ok.join(ref, on=[*_GROUP_KEY, "scenario"], how="inner")
    saved = [
        (F.col(c) - F.col(f"ref_{c}")).alias(f"saved_{c}")
        for c in ("cross_nearest", "cross_leader", "cost_nearest_usd_month", "cost_leader_usd_month")
    ]
    return joined.select(
        *_GROUP_KEY,
        "scenario",
        "assignor",
        "registered",
        "reference_assignor",
        "fetch_mode",
        "pairs",
        *_FIGURES,
        *[f"ref_{c}" for c in _FIGURES],
        *saved,
    )


def scenario_table(loc: Any) -> Any:
    """Every scenario against the baseline, for the same group and assignor (``delta_*``: scenario minus baseline)."""
    from pyspark.sql import functions as F  # type: ignore[import-not-found,unused-ignore]

    ok = loc.where(F.col("status") == units.OK)
    base = ok.where(F.col("scenario") == BASELINE).select(
        *_GROUP_KEY, "assignor", *[F.col(c).alias(f"base_{c}") for c in _FIGURES]
    )
    scenario_rows = loc.where(
        (F.col("scenario") != BASELINE) & (F.col("scenario") != "")
    )  # "": a bad snapshot
    joined = scenario_rows.join(base, on=[*_GROUP_KEY, "assignor"], how="left")
    deltas = [
        (F.col(c) - F.col(f"base_{c}")).alias(f"delta_{c}")
        for c in ("cross_nearest", "cross_leader", "cost_nearest_usd_month", "cost_leader_usd_month")
    ]
    return joined.select(
        *_GROUP_KEY,
        "scenario",
        "assignor",
        "registered",
        "fetch_mode",
        "status",
        "detail",
        "offline_partitions",
        *_FIGURES,
        *[f"base_{c}" for c in _FIGURES],
        *deltas,
    )


def cluster_table(loc: Any) -> Any:
    """Sums per (cluster, scenario, assignor); assignor ``registered``: each group with its own."""
    from pyspark.sql import functions as F  # type: ignore[import-not-found,unused-ignore]

    ok = loc.where(F.col("status") == units.OK)
    both = ok.unionByName(ok.where(F.col("registered")).withColumn("assignor", F.lit("registered")))
    sums = [
        "partitions",
        "pairs",
        "pairs_with_traffic",
        "bytes_per_s",
        "cross_nearest",
        "cross_leader",
        "cross_bytes_nearest",
        "cross_bytes_leader",
        "cost_nearest_usd_month",
        "cost_leader_usd_month",
        "moved",
        "offline_partitions",
    ]
    return both.groupBy("cluster_id", "taken_at", "scenario", "assignor").agg(
        F.count(F.lit(1)).alias("groups"), *[F.sum(c).alias(c) for c in sums]
    )


# ---- the job -----------------------------------------------------------------------


@dataclass
class Summary:
    out: str
    elapsed_s: float
    statuses: dict[str, int]
    scenarios: list[str]
    settings: dict[str, Any]
    snapshots: list[str] = field(default_factory=list)

    @property
    def units(self) -> int:
        return sum(self.statuses.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "out": self.out,
            "elapsed_s": round(self.elapsed_s, 3),
            "units": self.units,
            "statuses": self.statuses,
            "scenarios": self.scenarios,
            "snapshots": self.snapshots,
            "tables": list(TABLES),
            "settings": self.settings,
        }


def run_fleet(
    spark: Any,
    paths: Sequence[str],
    scenarios: Sequence[Scenario],
    out: str | Path,
    options: FleetOptions,
    progress: Progress | None = None,
    partitions: int = 0,
) -> Summary:
    """Compute and write every table under ``out`` (overwritten); returns counts, never instances."""
    from pyspark.sql import functions as F  # type: ignore[import-not-found,unused-ignore]

    start = time.monotonic()
    target = str(out)
    sc = spark.sparkContext

    def phase(name: str) -> None:
        sc.setJobDescription(f"rackplan fleet: {name}")
        if progress is not None:
            progress.phase = name

    phase("locality (assigning every unit)")
    unit_frame(spark, paths, scenarios, options, partitions).write.mode("overwrite").parquet(
        f"{target}/locality"
    )
    loc = spark.read.parquet(f"{target}/locality").drop(*_PLAN_COLUMNS)
    for name, build in (
        ("assignors", assignor_table),
        ("scenarios", scenario_table),
        ("clusters", cluster_table),
    ):
        phase(name)
        build(loc).coalesce(max(1, min(8, sc.defaultParallelism))).write.mode("overwrite").parquet(
            f"{target}/{name}"
        )
    phase("summary")
    statuses = {
        str(r["status"]): int(r["n"])
        for r in loc.groupBy("status").agg(F.count(F.lit(1)).alias("n")).collect()
    }
    summary = Summary(
        out=target,
        elapsed_s=time.monotonic() - start,
        statuses=dict(sorted(statuses.items())),
        scenarios=[s.name for s in scenarios],
        settings=options.model_dump(mode="json"),
        snapshots=[p for group in snapshot_sources(paths) for p in group],
    )
    if "://" not in target:
        Path(target, "summary.json").write_text(
            json.dumps(summary.to_json(), indent=2) + "\n", encoding="utf-8"
        )
    return summary


# ---- command line (``rackplan fleet`` and spark-submit) -------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--snapshots", nargs="+", required=True, help="snapshot files or directories (*.json, *.jsonl)"
    )
    p.add_argument("--scenarios", help="scenario file (YAML or JSON); without it, only the baseline")
    p.add_argument("--out", required=True, help="directory of the Parquet tables (overwritten)")
    p.add_argument("--settings", help="fleet settings YAML (keys spark, fleet); RACKPLAN_* variables win")
    p.add_argument("--master", help="Spark master (default: settings, local[*])")
    p.add_argument("--price-per-gb", type=float, help="USD per GB crossing zones (default 0.02)")
    p.add_argument("--history", choices=["latest", "all"], help="newest snapshot per cluster, or all")
    p.add_argument("--keep-plans", action="store_true", default=None, help="keep instances and plans")
    p.add_argument("--progress", type=float, help="seconds between progress lines; 0: none")


def settings_from_args(args: argparse.Namespace) -> FleetSettings:
    return FleetSettings.load(
        args.settings,
        spark={"master": args.master},
        fleet={
            "price_per_gb": args.price_per_gb,
            "history": args.history,
            "keep_plans": args.keep_plans,
            "progress_interval_s": args.progress,
        },
    )


def run_from_args(args: argparse.Namespace) -> int:
    """``rackplan fleet``: exit 0, 1 when a unit failed (a bug), 2 on bad settings or input."""
    try:
        settings = settings_from_args(args)
        scenarios = load_scenarios(args.scenarios)
        snapshot_sources(args.snapshots)
    except (OSError, ValueError) as e:
        print(f"rackplan: error: {e}", file=sys.stderr)
        return 2
    try:
        import pyspark  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        print(
            "rackplan: error: `rackplan fleet` needs PySpark: pip install 'rackplan[spark]'", file=sys.stderr
        )
        return 2
    spark = build_session(settings.spark, use_settings_master=args.master is not None or not submitted())
    try:
        with Progress(spark, settings.fleet.progress_interval_s) as progress:
            summary = run_fleet(
                spark,
                args.snapshots,
                scenarios,
                args.out,
                settings.fleet,
                progress,
                settings.spark.partitions,
            )
    finally:
        spark.stop()
    print(json.dumps(summary.to_json(), indent=2))
    return 1 if summary.statuses.get(units.FAILED) else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fleet", description="rackplan fleet what-ifs on Spark")
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
