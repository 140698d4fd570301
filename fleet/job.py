"""The fleet job on Spark: snapshots x scenarios x assignors -> Parquet tables.

Jobs (named in the Spark UI and the event log: ``rackplan fleet <run_id>: <phase>``)::

    list     snapshot files --JVM only--> (source, cluster_id, taken_at, groups, digest) per document
             -> the driver picks the documents (newest per cluster) and sizes the partitions
    units    documents --mapInArrow: groups--> one row per group (its slice of the cluster)
             --round-robin repartition (group rows, never instances)-->
             --mapInArrow: every (scenario, assignor) of the group, ``rackplan assign``--> figures,
               each beside the reference assignor's and the baseline's of its group
             --by (cluster_id, snapshot_date)--> cached figures -> locality/  (Parquet, partitioned
               by cluster_id and snapshot_date)
    tables   cached figures --> assignors/, scenarios/ (filters and projections: the comparisons
             came out of the Python pass), clusters/ (a groupBy), counts per status: four jobs at once
    commit   staging folder -> ``--out`` by renames; summary.json last

Snapshots and instances stay on the executors: the driver collects one small
row per snapshot document and, at the end, one count per status.  Runs in
``rackplan fleet`` or under ``spark-submit fleet/job.py --snapshots ...``.
Under Spark Connect (no ``sparkContext``) the job runs without the progress
counter, job names and the Hadoop file-system commit (see docs/fleet.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file by spark-submit: make the package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rackplan.fleet import units
from rackplan.fleet.scenarios import BASELINE, Scenario, load_scenarios, scenarios_json
from rackplan.fleet.settings import FleetOptions, FleetSettings, SparkSettings
from rackplan.fleet.stages import EVALUATED_COLUMNS, EvaluateGroups, GroupsOf, schema
from rackplan.fleet.storage import InputError, Store, check_inputs, store_for

TABLES = ("locality", "assignors", "scenarios", "clusters")
#: version of the tables' layout; 2: partitioned by cluster_id/snapshot_date, run_id, typed taken_at
SCHEMA_VERSION = 2
PARTITION_COLUMNS = ("cluster_id", "snapshot_date")
_PLAN_COLUMNS = ("instance", "plan", "settled_instance", "settled_plan")

EXIT_OK = 0
EXIT_UNIT_FAILED = 1  # a unit raised: a bug (see its detail)
EXIT_BAD_INPUT = 2  # settings, scenarios or snapshot paths
EXIT_INFRASTRUCTURE = 3  # Spark did not start, an executor could not run the job, storage failed
EXIT_NO_UNIT_OK = 4  # the job ran but not one unit could be evaluated (e.g. every snapshot invalid)


# ---- session ---------------------------------------------------------------------


def submitted() -> bool:
    """True under ``spark-submit``: master and resources come from it, not from settings."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))


def context(spark: Any) -> Any:
    """The session's SparkContext, or None under Spark Connect (which has none)."""
    try:
        return spark.sparkContext
    except Exception:
        return None


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
    for key, value in sorted(session_conf(s, launches_driver=not submitted()).items()):
        b = b.config(key, value)
    b = b.config("spark.ui.enabled", "true" if s.ui else "false")
    b = b.config("spark.ui.showConsoleProgress", "false")  # our own progress line instead
    b = b.config("spark.sql.execution.arrow.maxRecordsPerBatch", str(s.arrow_batch_rows))
    b = b.config("spark.sql.session.timeZone", "UTC")
    b = b.config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")  # not INT96: any reader
    b = b.config("spark.sql.shuffle.partitions", str(s.partitions or 8))  # the small tables' shuffles
    for key, value in sorted(s.conf.items()):
        if key not in _JVM_OPTIONS:  # merged into session_conf's
            b = b.config(key, value)
    spark = b.getOrCreate()
    sc = context(spark)
    if sc is not None:
        sc.setLogLevel("WARN")
    return spark


_JVM_OPTIONS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


def session_conf(s: SparkSettings, launches_driver: bool) -> dict[str, str]:
    """The Spark properties that make a short job cheap (docs/performance.md, fleet, says what each saves).

    ``jvm_options`` go before the user's own ``extraJavaOptions`` (the last
    JVM flag wins, so theirs do); the driver's only when this process starts
    the driver JVM (under ``spark-submit`` it is already running).
    """
    out: dict[str, str] = {}
    for key in _JVM_OPTIONS:
        ours = s.jvm_options.strip()
        if key == _JVM_OPTIONS[0]:
            if not launches_driver:
                if key in s.conf:
                    out[key] = s.conf[key]
                continue
            if s.class_archive:
                use = "SharedArchiveFile" if Path(s.class_archive).is_file() else "ArchiveClassesAtExit"
                # The JVM logs its archive warnings (skipped classes, a stale archive) to stdout by
                # default, which carries the summary JSON: to stderr instead.
                log = "-Xlog:disable -Xlog:all=warning:stderr"
                ours = f"{ours} -XX:{use}={s.class_archive} {log}".strip()
        joined = " ".join(v for v in (ours, s.conf.get(key, "").strip()) if v)
        if joined:
            out[key] = joined
    if not s.codegen:
        out["spark.sql.codegen.wholeStage"] = "false"
        out["spark.sql.codegen.factoryMode"] = "NO_CODEGEN"  # interpreted projections: no Janino
    return out


def parallelism(spark: Any) -> int:
    """Cores Spark can run tasks on (Spark Connect: ``spark.default.parallelism`` or 2)."""
    sc = context(spark)
    if sc is not None:
        return max(1, int(sc.defaultParallelism))
    try:
        return max(1, int(spark.conf.get("spark.default.parallelism", "2")))
    except (TypeError, ValueError):
        return 2


def partitions_for(units_count: int, groups: int, cores: int, configured: int = 0) -> int:
    """Partitions of the unit stage, sized from the unit count.

    A multiple of the cores (no core idles on the last wave), about 400 units
    per core and wave, at most eight waves (uneven groups still spread), never
    more than the groups.  ``configured`` > 0 wins.
    """
    if configured:
        return configured
    waves = min(8, max(1, math.ceil(units_count / (cores * 400))))
    return max(1, min(max(1, groups), cores * waves))


# ---- progress --------------------------------------------------------------------


class Progress:
    """One line on stderr per phase change and every ``interval`` seconds while a phase runs.

    The unit phase counts units done (a Spark accumulator: it grows when a
    task ends), units per second and the time left; the count never goes back.
    """

    def __init__(self, interval: float, write: Callable[[str], None] | None = None) -> None:
        self._interval = interval
        self._write = write or (lambda line: print(line, file=sys.stderr, flush=True))
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._start = time.monotonic()
        self.phase = "starting"
        self._phase_start = self._start
        self._total = 0
        self._done = 0
        self._counter: Callable[[], int] | None = None

    def set_phase(self, name: str, total: int = 0, counter: Callable[[], int] | None = None) -> None:
        if self._interval > 0 and self._total:
            self._write(self.line())  # the counted phase's final count
        with self._lock:
            self.phase, self._total, self._counter, self._done = name, total, counter, 0
            self._phase_start = time.monotonic()
        if self._interval > 0:
            self._write(self.line())

    def line(self) -> str:
        with self._lock:
            now = time.monotonic()
            elapsed, in_phase = now - self._start, now - self._phase_start
            if not self._total:
                return f"rackplan fleet: {self.phase} ({elapsed:.0f} s)"
            if self._counter is not None:
                self._done = max(self._done, min(self._total, int(self._counter())))
            done, total = self._done, self._total
        rate = done / in_phase if in_phase > 0 else 0.0
        eta = f"ETA {(total - done) / rate:.0f} s" if rate > 0 else "ETA unknown"
        return (
            f"rackplan fleet: {self.phase}: {done:,}/{total:,} units ({100 * done / total:.0f} %), "
            f"{rate:,.0f} units/s, {eta} ({elapsed:.0f} s)"
        )

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


# ---- reading snapshots --------------------------------------------------------------


def read_documents(spark: Any, paths: Sequence[str]) -> Any:
    """One row (``value``, ``source``, ``digest``) per snapshot document, read by the executors.

    ``*.json``: one document per file; ``*.jsonl``: one per non-blank line;
    ``*.parquet``: one per row (a string column ``document`` holding the JSON,
    or the document's fields as columns).  Paths are files, folders (searched
    recursively) or globs, local or any URI Spark reads.
    """
    from pyspark.errors import AnalysisException  # type: ignore[import-not-found,unused-ignore]
    from pyspark.sql import functions as F  # type: ignore[import-not-found,unused-ignore]

    source = F.col("_metadata.file_path").alias("source")  # a hidden column of file sources

    def reader(glob_: str) -> Any:
        return spark.read.option("pathGlobFilter", glob_).option("recursiveFileLookup", "true")

    frames = [
        reader("*.json").text(list(paths), wholetext=True).select("value", source),
        reader("*.jsonl").text(list(paths)).select("value", source).where(F.trim(F.col("value")) != ""),
    ]
    try:
        pq = reader("*.parquet").parquet(*paths)
    except AnalysisException as e:  # no Parquet file among the paths: nothing to infer a schema from
        if "UNABLE_TO_INFER_SCHEMA" not in str(e) and "Unable to infer schema" not in str(e):
            raise
    else:
        doc = (
            F.col("document").cast("string")
            if "document" in pq.columns
            else F.to_json(F.struct(*[F.col(c) for c in pq.columns]))
        )
        frames.append(pq.select(doc.alias("value"), source))
    docs = frames[0]
    for f in frames[1:]:
        docs = docs.unionByName(f)
    return docs.withColumn("digest", F.xxhash64("value"))


@dataclass(frozen=True)
class Documents:
    """What the driver knows of the snapshot documents before evaluating them."""

    documents: int
    invalid: int
    keep: frozenset[int] | None
    groups: int
    sources: list[str]


def choose_documents(rows: Sequence[Any], history: str) -> Documents:
    """From one (source, cluster_id, taken_at, groups, digest) row per document: the documents to
    evaluate (newest per cluster, or all; one per (cluster, taken_at)) and their group count."""
    valid = [r for r in rows if r["cluster_id"] is not None]
    best: dict[tuple[str, str], Any] = {}
    for r in sorted(valid, key=lambda r: (str(r["source"]), int(r["digest"]))):
        best.setdefault((str(r["cluster_id"]), str(r["taken_at"] or "")), r)
    if history == "latest":
        newest: dict[str, str] = {}
        for cid, taken in best:
            newest[cid] = max(newest.get(cid, taken), taken)
        best = {k: v for k, v in best.items() if newest[k[0]] == k[1]}
    return Documents(
        documents=len(rows),
        invalid=len(rows) - len(valid),
        keep=frozenset(int(r["digest"]) for r in best.values()),
        groups=sum(int(r["groups"] or 0) for r in best.values()),
        sources=sorted({str(r["source"]) for r in rows}),
    )


def list_documents(docs: Any, history: str) -> Documents:
    """The ``list`` job: a few fields of every document, read in the JVM (no Python worker)."""
    from pyspark.sql import functions as F  # type: ignore[import-not-found,unused-ignore]

    def count(key: str) -> Any:
        return F.coalesce(F.json_array_length(F.get_json_object("value", f"$.{key}")), F.lit(0))

    rows = docs.select(
        "source",
        F.get_json_object("value", "$.cluster_id").alias("cluster_id"),
        F.get_json_object("value", "$.taken_at").alias("taken_at"),
        (count("consumer_groups") + count("streams_apps")).alias("groups"),
        "digest",
    ).collect()
    return choose_documents(rows, history)


def assignors_per_group(options: FleetOptions) -> int:
    return max(len(options.consumer_assignors), len(options.streams_strategies))


def unit_frame(
    docs: Any,
    chosen: Documents,
    scenarios: Sequence[Scenario],
    options: FleetOptions,
    partitions: int,
    counter: Any = None,
) -> Any:
    """The lazily computed table of figures, one row per unit (with the comparisons of
    :func:`units.with_comparisons`): two Python passes, one shuffle of group rows between them
    (so one big cluster does not land on one core)."""
    groups = docs.mapInArrow(GroupsOf(chosen.keep), schema(units.GROUP_COLUMNS))
    evaluate = EvaluateGroups(
        json.dumps(scenarios_json(scenarios)),
        options.price_per_gb,
        options.keep_plans,
        tuple(options.consumer_assignors),
        tuple(options.streams_strategies),
        counter,
    )
    results = groups.repartition(partitions).mapInArrow(evaluate, schema(EVALUATED_COLUMNS))
    if not options.keep_plans:
        results = results.drop(*_PLAN_COLUMNS)
    return results


def with_run_columns(frame: Any, run_id: str) -> Any:
    """``taken_at`` typed (timestamp, UTC), ``snapshot_date`` (the partition), ``run_id``, ``schema_version``."""
    from pyspark.sql import functions as F  # type: ignore[import-not-found,unused-ignore]

    taken = F.to_timestamp(F.when(F.col("taken_at") != "", F.col("taken_at")))
    return (
        frame.withColumn("taken_at", taken)
        .withColumn("snapshot_date", F.to_date("taken_at"))
        .withColumn("run_id", F.lit(run_id))
        .withColumn("schema_version", F.lit(SCHEMA_VERSION))
    )


# ---- derived tables ----------------------------------------------------------------

_GROUP_KEY = ["cluster_id", "taken_at", "kind", "group"]
_RUN = ["run_id", "schema_version", "snapshot_date"]
_FIGURES = [c for c, _ in units.COMPARED]
_COMPARISONS = [c for c, _ in units.COMPARISON_COLUMNS]


def assignor_table(figures: Any) -> Any:
    """Every assignor against the reference (rack-optimal; Streams: min_traffic) on the same group and scenario.

    ``saved_*``: what switching from that assignor to the reference would save.  The
    reference's figures (``ref_*``) come with every row out of the Python pass
    (:func:`units.with_comparisons`): a filter and a projection, no shuffle.
    """
    from pyspark.sql import functions as F  # type: ignore[import-not-found,unused-ignore]

    joined = figures.where((F.col("status") == units.OK) & F.col("reference_assignor").isNotNull())
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
        *_RUN,
    )


def scenario_table(figures: Any) -> Any:
    """Every scenario against the baseline, for the same group and assignor (``delta_*``: scenario minus
    baseline; ``base_*`` from the Python pass); scenarios that do not apply keep their rows (status
    ``n/a``, figures null)."""
    from pyspark.sql import functions as F  # type: ignore[import-not-found,unused-ignore]

    rows = figures.where((F.col("scenario") != BASELINE) & (F.col("scenario") != ""))  # "": bad snapshot
    deltas = [
        (F.col(c) - F.col(f"base_{c}")).alias(f"delta_{c}")
        for c in ("cross_nearest", "cross_leader", "cost_nearest_usd_month", "cost_leader_usd_month")
    ]
    return rows.select(
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
        *_RUN,
    )


_SUMS = [
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
_DOUBLE_SUMS = {
    "bytes_per_s",
    "cross_bytes_nearest",
    "cross_bytes_leader",
    "cost_nearest_usd_month",
    "cost_leader_usd_month",
}


def cluster_table(figures: Any) -> Any:
    """Sums per (cluster, scenario, assignor); assignor ``registered``: each group with its own.

    Floating sums go through decimals (exact, so the same whatever the
    partitioning: local[1], local[2] and a cluster give the same bits).
    """
    from pyspark.sql import functions as F  # type: ignore[import-not-found,unused-ignore]

    ok = figures.where(F.col("status") == units.OK)
    both = ok.unionByName(ok.where(F.col("registered")).withColumn("assignor", F.lit("registered")))

    def total(c: str) -> Any:
        if c in _DOUBLE_SUMS:
            return F.sum(F.col(c).cast("decimal(38,9)")).cast("double").alias(c)
        return F.sum(c).alias(c)

    return both.groupBy("cluster_id", "taken_at", "scenario", "assignor", *_RUN).agg(
        F.count(F.lit(1)).alias("groups"), *[total(c) for c in _SUMS]
    )


# ---- the job -----------------------------------------------------------------------


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

    @property
    def units(self) -> int:
        return sum(self.statuses.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "out": self.out,
            "run_id": self.run_id,
            "schema_version": SCHEMA_VERSION,
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


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def _name_jobs(spark: Any, run_id: str, phase: str) -> None:
    """Name the Spark jobs of a phase (UI, event log, history server); tags under Spark Connect."""
    sc = context(spark)
    if sc is not None:
        sc.setJobGroup(f"rackplan-fleet-{run_id}", f"rackplan fleet {run_id}: {phase}")
        return
    with contextlib.suppress(Exception):
        spark.addTag(f"rackplan-fleet-{phase.split()[0]}")


def run_concurrently(spark: Any, run_id: str, jobs: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
    """Run each job from its own driver thread (Spark schedules their tasks side by side: the
    small tables are one task each, so one after the other they would leave cores idle); each
    thread names its Spark jobs.  The first failure is raised once all have ended."""

    def named(name: str, job: Callable[[], Any]) -> Any:
        _name_jobs(spark, run_id, f"tables ({name})")
        return job()

    with ThreadPoolExecutor(max_workers=max(1, len(jobs)), thread_name_prefix="fleet-tables") as pool:
        futures = {name: pool.submit(named, name, job) for name, job in jobs.items()}
    return {name: f.result() for name, f in futures.items()}


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


def run_fleet(
    spark: Any,
    paths: Sequence[str],
    scenarios: Sequence[Scenario],
    out: str | Path,
    options: FleetOptions,
    progress: Progress | None = None,
    partitions: int = 0,
    run_id: str | None = None,
) -> Summary:
    """Compute every table into a staging folder under ``out``, then commit (see :func:`commit`).

    Returns counts, never instances.  Raises :class:`InputError` when the
    paths hold no snapshot document.
    """
    from pyspark.sql import functions as F  # type: ignore[import-not-found,unused-ignore]

    start = time.monotonic()
    run_id = run_id or new_run_id()
    target = str(out).rstrip("/")
    store = store_for(target, spark)
    staging = f"{target}/_staging-{run_id}" if store is not None else target
    timings: dict[str, float] = {}
    mark, current = time.monotonic(), ""
    sc = context(spark)

    def phase(name: str, total: int = 0, counter: Callable[[], int] | None = None) -> None:
        nonlocal mark, current
        now = time.monotonic()
        if current:
            timings[current] = now - mark
        mark, current = now, name.split(" ")[0]
        if progress is not None:
            progress.set_phase(name, total, counter)
        _name_jobs(spark, run_id, name)

    phase("list (reading snapshot documents)")
    docs = read_documents(spark, paths)
    chosen = list_documents(docs, options.history)
    if chosen.documents == 0:
        raise InputError(f"--snapshots: no snapshot document in {', '.join(paths)}")
    per_group = len(scenarios) * assignors_per_group(options)
    expected = chosen.groups * per_group + chosen.invalid
    cores = parallelism(spark)
    parts = partitions_for(expected, chosen.groups, cores, partitions)
    acc = sc.accumulator(0) if sc is not None else None
    phase("units (rackplan assign on every unit)", expected, (lambda: int(acc.value)) if acc else None)
    frame = with_run_columns(unit_frame(docs, chosen, scenarios, options, parts, acc), run_id)
    # One writer per (cluster, date): a file each, not one per unit partition and cluster; one
    # partition per core (a number, so adaptive execution does not coalesce them into one task and
    # idle the other cores).  The figures are cached as they are written (the one scan of the
    # Python passes' output): the tables are computed from the cache, never from the files.  Sorted
    # by the partition columns once, here, so that none of the four partitioned writes sorts again.
    frame = frame.repartition(cores, *PARTITION_COLUMNS).sortWithinPartitions(*PARTITION_COLUMNS).persist()
    try:
        write = frame.drop(*_COMPARISONS).write.mode("overwrite").partitionBy(*PARTITION_COLUMNS)
        write.parquet(f"{staging}/locality")
        phase("tables (assignors, scenarios, clusters)")

        def table_job(name: str, build: Callable[[Any], Any]) -> Callable[[], None]:
            def job() -> None:
                build(frame).write.mode("overwrite").partitionBy(*PARTITION_COLUMNS).parquet(
                    f"{staging}/{name}"
                )

            return job

        counts = frame.groupBy("status").agg(
            F.count(F.lit(1)).alias("n"), F.sum(F.coalesce(F.col("elapsed_ms"), F.lit(0.0))).alias("ms")
        )
        done = run_concurrently(
            spark,
            run_id,
            {
                "assignors": table_job("assignors", assignor_table),
                "scenarios": table_job("scenarios", scenario_table),
                "clusters": table_job("clusters", cluster_table),
                "statuses": counts.collect,
            },
        )
    finally:
        frame.unpersist()
    rows = done["statuses"]
    phase("commit")
    summary = Summary(
        out=target,
        run_id=run_id,
        elapsed_s=0.0,
        statuses=dict(sorted((str(r["status"]), int(r["n"])) for r in rows)),
        scenarios=[s.name for s in scenarios],
        settings=options.model_dump(mode="json"),
        snapshots=chosen.sources,
        documents=chosen.documents,
        partitions=parts,
        assign_ms=sum(float(r["ms"] or 0.0) for r in rows),
    )
    summary.elapsed_s = time.monotonic() - start
    summary.timings_s = dict(timings)
    if store is not None:
        commit(store, staging, target, run_id, json.dumps(summary.to_json(), indent=2) + "\n")
    summary.timings_s["commit"] = time.monotonic() - mark
    summary.elapsed_s = time.monotonic() - start
    if progress is not None:
        progress.set_phase(f"done in {summary.elapsed_s:.0f} s")
    return summary


# ---- command line (``rackplan fleet`` and spark-submit) -------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--snapshots",
        nargs="+",
        required=True,
        help="snapshot files, folders or globs (*.json, *.jsonl, *.parquet), local or URIs",
    )
    p.add_argument("--scenarios", help="scenario file (YAML or JSON); without it, only the baseline")
    p.add_argument("--out", required=True, help="folder or URI of the Parquet tables (replaced atomically)")
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


def _error(message: str) -> None:
    print(f"rackplan: error: {message}", file=sys.stderr, flush=True)


def classify(e: BaseException) -> tuple[int, str]:
    """(exit code, one line) for an exception raised by Spark while the job ran."""
    text = str(e)
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(e).__name__)
    if "PATH_NOT_FOUND" in text or "Path does not exist" in text:
        return EXIT_BAD_INPUT, f"--snapshots: {first}"
    missing = "No module named"
    if missing in text:
        at = text.index(missing)
        module = text[at : text.find("\n", at) if "\n" in text[at:] else len(text)].strip()
        return EXIT_INFRASTRUCTURE, (
            f"the executors' Python cannot import what the job needs ({module}): ship the environment "
            "(docs/fleet.md, 'On a cluster')"
        )
    return EXIT_INFRASTRUCTURE, f"Spark failed: {type(e).__name__}: {first[:500]}"


def run_from_args(args: argparse.Namespace) -> int:
    """``rackplan fleet``; exit codes: 0 ok, 1 a unit failed (a bug), 2 bad settings or input,
    3 infrastructure (Spark, executors, storage), 4 no unit could be evaluated."""
    try:
        settings = settings_from_args(args)
        scenarios = load_scenarios(args.scenarios)
        check_inputs(args.snapshots)
    except (OSError, ValueError) as e:
        _error(str(e))
        return EXIT_BAD_INPUT
    try:
        import pyspark  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        _error("`rackplan fleet` needs PySpark: pip install 'rackplan[spark]'")
        return EXIT_BAD_INPUT
    with Progress(settings.fleet.progress_interval_s) as progress:
        progress.set_phase("starting Spark")
        started = time.monotonic()
        try:
            spark = build_session(
                settings.spark, use_settings_master=args.master is not None or not submitted()
            )
        except Exception as e:
            _error(
                f"Spark did not start: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            )
            return EXIT_INFRASTRUCTURE
        spark_start = time.monotonic() - started
        try:
            summary = run_fleet(
                spark,
                args.snapshots,
                scenarios,
                args.out,
                settings.fleet,
                progress,
                settings.spark.partitions,
            )
        except InputError as e:
            _error(str(e))
            return EXIT_BAD_INPUT
        except Exception as e:
            code, line = classify(e)
            _error(line)
            return code
        finally:
            spark.stop()
    summary.timings_s = {"spark_start": spark_start, **summary.timings_s}
    print(json.dumps(summary.to_json(), indent=2))
    code = exit_code(summary.statuses)
    if code == EXIT_NO_UNIT_OK:
        _error(f"no unit could be evaluated ({', '.join(f'{k}: {v}' for k, v in summary.statuses.items())})")
    return code


def exit_code(statuses: dict[str, int]) -> int:
    """1 when a unit failed (a bug), 4 when no unit is ok, else 0."""
    if statuses.get(units.FAILED):
        return EXIT_UNIT_FAILED
    if not statuses.get(units.OK):
        return EXIT_NO_UNIT_OK
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fleet", description="rackplan fleet what-ifs on Spark")
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
