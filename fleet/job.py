"""The fleet job on Spark: snapshots x scenarios x assignors -> Parquet tables.

Jobs (named in the Spark UI and the event log: ``rackplan fleet <run_id>: <phase>``)::

    reading  snapshot files --JVM only--> (source, cluster_id, taken_at, groups, digest) per document
             -> the driver picks the documents (newest per cluster) and sizes the partitions
    planning documents --mapInArrow: groups--> one row per group (its slice of the cluster)
             --round-robin repartition (group rows, never instances)-->
             --mapInArrow: every (scenario, assignor) of the group, ``rackplan assign``--> figures,
               each beside the reference assignor's and the baseline's of its group
             --by (cluster_id, snapshot_date)--> --mapInArrow: the four tables of each (cluster, date)
               written by the Python worker (rackplan.fleet.outputs, as the in-process engine
               writes them)--> counts per status
    commit   staging folder -> ``--out`` by renames; summary.json last

Snapshots and instances stay on the executors: the driver collects one small
row per snapshot document and, at the end, one count per status.  Runs in
``rackplan fleet`` (which picks this engine or :mod:`rackplan.fleet.local`) or
under ``spark-submit fleet/job.py --snapshots ...``.  Under Spark Connect (no
``sparkContext``) the job runs without the progress counter, job names and the
Hadoop file-system commit (see docs/fleet.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file by spark-submit: make the package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rackplan.fleet import units
from rackplan.fleet.documents import LISTING_COLUMNS, Documents, choose_documents
from rackplan.fleet.outputs import PARTITION_COLUMNS, PLAN_COLUMNS, SCHEMA_VERSION, TABLES, make_dirs
from rackplan.fleet.progress import Progress
from rackplan.fleet.runs import Phases, Summary, commit, finish, new_run_id, run_id_of, tally
from rackplan.fleet.scenarios import Scenario, load_scenarios
from rackplan.fleet.settings import FleetOptions, FleetSettings, SparkSettings
from rackplan.fleet.stages import (
    EVALUATED_COLUMNS,
    WRITTEN_COLUMNS,
    EvaluateGroups,
    Evaluation,
    GroupsOf,
    ListDocuments,
    WriteTables,
    schema,
)
from rackplan.fleet.storage import InputError, check_inputs, local_path, store_for

__all__ = [
    "PARTITION_COLUMNS",
    "SCHEMA_VERSION",
    "TABLES",
    "Documents",
    "Progress",
    "Summary",
    "choose_documents",
    "commit",
    "new_run_id",
]

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
        reader("*.jsonl").text(list(paths)).select("value", source).where(~F.col("value").rlike("^[ \t]*$")),
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
    # The text as bytes to Python (intake.text_of: bytes that are not UTF-8 make a bad document, not a
    # failed decode in the worker); the digest is documents.digest, in the JVM.
    return docs.select(
        F.col("value").cast("binary").alias("value"), "source", F.sha2("value", 256).alias("digest")
    )


def list_documents(docs: Any, history: str) -> Documents:
    """The ``list`` job: every document parsed in a Python pass (:class:`~rackplan.fleet.stages.ListDocuments`,
    what the local engine runs), five small fields of each collected, the documents chosen."""
    return choose_documents(docs.mapInArrow(ListDocuments(), schema(LISTING_COLUMNS)).collect(), history)


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
    evaluate = EvaluateGroups(Evaluation.of(scenarios, options), counter)
    results = groups.repartition(partitions).mapInArrow(evaluate, schema(EVALUATED_COLUMNS))
    if not options.keep_plans:
        results = results.drop(*PLAN_COLUMNS)
    return results


def _name_jobs(spark: Any, run_id: str, phase: str) -> None:
    """Name the Spark jobs of a phase (UI, event log, history server); tags under Spark Connect."""
    sc = context(spark)
    if sc is not None:
        sc.setJobGroup(f"rackplan-fleet-{run_id}", f"rackplan fleet {run_id}: {phase}")
        return
    with contextlib.suppress(Exception):
        spark.addTag(f"rackplan-fleet-{phase.split()[0]}")


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
    paths hold no snapshot document.  ``run_id``: see :func:`~rackplan.fleet.runs.run_id_of`.
    """
    attempt = run_id or new_run_id()  # the staging folder's and the Spark jobs' name
    target = str(out).rstrip("/")
    store = store_for(target, spark)
    staging = f"{target}/_staging-{attempt}" if store is not None else target
    sc = context(spark)
    phases = Phases(progress)

    def phase(name: str, total: int = 0, counter: Callable[[], int] | None = None) -> None:
        key = {"reading": "list", "planning": "units"}.get(name, name)
        phases.begin(name, key, total, counter=counter, then="writing" if total else None)
        _name_jobs(spark, attempt, name)

    phase("reading")
    docs = read_documents(spark, paths)
    chosen = list_documents(docs, options.history)
    if chosen.documents == 0:
        raise InputError(f"--snapshots: no snapshot document in {', '.join(paths)}")
    expected = Evaluation.of(scenarios, options).units(chosen)
    run_id = run_id_of(chosen, scenarios, options, attempt)  # what the tables and summary.json carry
    cores = parallelism(spark)
    parts = partitions_for(expected, chosen.groups, cores, partitions)
    acc = sc.accumulator(0) if sc is not None else None
    phase("planning", expected, (lambda: int(acc.value)) if acc else None)
    frame = unit_frame(docs, chosen, scenarios, options, parts, acc)
    # One writer per (cluster, date), in a Python worker (rackplan.fleet.outputs, as the in-process
    # engine writes): one partition per core (a number, so adaptive execution does not coalesce them
    # into one task and idle the other cores), each (cluster, date) contiguous in its partition.
    make_dirs(staging)
    written = (
        frame.repartition(cores, *PARTITION_COLUMNS)
        .sortWithinPartitions(*PARTITION_COLUMNS)
        .mapInArrow(WriteTables(staging, run_id, options.keep_plans), schema(WRITTEN_COLUMNS))
        .collect()
    )
    phase("commit")
    statuses, assign_ms = tally(written)
    summary = Summary(
        out=target,
        run_id=run_id,
        elapsed_s=0.0,
        statuses=statuses,
        scenarios=[s.name for s in scenarios],
        settings=options.model_dump(mode="json"),
        snapshots=chosen.sources,
        documents=chosen.documents,
        partitions=parts,
        assign_ms=assign_ms,
        engine="spark",
    )
    return finish(summary, store, staging, phases)


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
    p.add_argument("--progress", type=float, help="seconds between progress events; 0: phase events only")
    p.add_argument(
        "--engine",
        choices=["auto", "local", "spark"],
        help="local: in this process, no Spark; spark: the Spark job; auto (default): local up to "
        "fleet.local_max_units units on local paths",
    )


def settings_from_args(args: argparse.Namespace) -> FleetSettings:
    return FleetSettings.load(
        args.settings,
        spark={"master": args.master},
        fleet={
            "price_per_gb": args.price_per_gb,
            "history": args.history,
            "keep_plans": args.keep_plans,
            "progress_interval_s": args.progress,
            "engine": getattr(args, "engine", None),
        },
    )


def _error(message: str) -> None:
    print(f"rackplan: error: {message}", file=sys.stderr, flush=True)


#: Spark's words for a snapshot path that is missing, or a file that is not the Parquet its name says
_BAD_PATHS = ("PATH_NOT_FOUND", "Path does not exist", "CANNOT_READ_FILE_FOOTER", "is not a Parquet file")


def classify(e: BaseException) -> tuple[int, str]:
    """(exit code, one line) for an exception raised by Spark while the job ran."""
    text = str(e)
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(e).__name__)
    if any(m in text for m in _BAD_PATHS):
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


def choose_engine(options: FleetOptions, paths: Sequence[str], out: str, units_of: Callable[[], int]) -> str:
    """``local`` or ``spark``: the setting, or under ``auto`` local when every path is local (not under
    ``spark-submit``) and the run has at most ``local_max_units`` units (``units_of``: counts them)."""
    if options.engine != "auto":
        return options.engine
    if submitted() or any(local_path(p) is None for p in [*paths, out]):
        return "spark"
    return "local" if units_of() <= options.local_max_units else "spark"


def run_from_args(args: argparse.Namespace) -> int:
    """``rackplan fleet``; exit codes: 0 ok, 1 a unit failed (a bug), 2 bad settings or input,
    3 infrastructure (Spark, executors, storage), 4 no unit could be evaluated."""
    from rackplan.agent.core.logging import configure
    from rackplan.fleet.local import list_local, run_local

    try:
        settings = settings_from_args(args)
        scenarios = load_scenarios(args.scenarios)
        check_inputs(args.snapshots)
    except (OSError, ValueError) as e:
        _error(str(e))
        return EXIT_BAD_INPUT
    configure(stream=sys.stderr)  # progress events on stderr: stdout carries the summary
    # The assignors' per-unit notes (info) would be one line per unit of a fleet: warnings only.
    logging.getLogger("rackplan.assignor").setLevel(logging.WARNING)
    options = settings.fleet
    with Progress(options.progress_interval_s) as progress:
        listed: list[tuple[list[dict[str, Any]], Documents]] = []
        reading: list[float] = []  # seconds spent counting the units (the local engine's reading)

        def count() -> int:
            progress.set_phase("reading")
            began = time.monotonic()
            listed.append(list_local(args.snapshots, options.history))
            reading.append(time.monotonic() - began)
            return Evaluation.of(scenarios, options).units(listed[0][1])

        try:
            engine = choose_engine(options, args.snapshots, args.out, count)
            if engine == "spark":
                listed.clear()  # Spark reads the documents itself: do not hold them during its run
            if engine == "local":
                summary = run_local(
                    args.snapshots,
                    scenarios,
                    args.out,
                    options,
                    progress,
                    listed=listed[0] if listed else None,
                )
                if reading:  # the documents were read to choose the engine: that was the reading phase
                    summary.timings_s["list"] = reading[0] + summary.timings_s.get("list", 0.0)
            else:
                code, summary_or_none = _run_spark(args, settings, scenarios, progress)
                if summary_or_none is None:
                    return code
                summary = summary_or_none
        except InputError as e:
            _error(str(e))
            return EXIT_BAD_INPUT
        except OSError as e:
            _error(f"storage: {e}")
            return EXIT_INFRASTRUCTURE
    print(json.dumps(summary.to_json(), indent=2))
    code = exit_code(summary.statuses)
    if code == EXIT_NO_UNIT_OK:
        _error(f"no unit could be evaluated ({', '.join(f'{k}: {v}' for k, v in summary.statuses.items())})")
    return code


def _run_spark(
    args: argparse.Namespace, settings: FleetSettings, scenarios: Sequence[Scenario], progress: Progress
) -> tuple[int, Summary | None]:
    """The Spark engine: (exit code, summary); no summary when it failed (the line is printed)."""
    try:
        import pyspark  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        _error("the Spark engine needs PySpark: pip install 'rackplan[spark]' (or --engine local)")
        return EXIT_BAD_INPUT, None
    progress.set_phase("starting Spark")
    started = time.monotonic()
    try:
        spark = build_session(settings.spark, use_settings_master=args.master is not None or not submitted())
    except Exception as e:
        text = str(e).strip()
        _error(f"Spark did not start: {type(e).__name__}: {text.splitlines()[0] if text else ''}")
        return EXIT_INFRASTRUCTURE, None
    spark_start = time.monotonic() - started
    try:
        summary = run_fleet(
            spark, args.snapshots, scenarios, args.out, settings.fleet, progress, settings.spark.partitions
        )
    except InputError:
        raise
    except Exception as e:
        code, line = classify(e)
        _error(line)
        return code, None
    finally:
        spark.stop()
    summary.timings_s = {"spark_start": spark_start, **summary.timings_s}
    return EXIT_OK, summary


def exit_code(statuses: dict[str, int]) -> int:
    """1 when a unit failed (a bug), 4 when no unit is ok, else 0."""
    if statuses.get(units.FAILED):
        return EXIT_UNIT_FAILED
    if not statuses.get(units.OK):
        return EXIT_NO_UNIT_OK
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fleet", description="rackplan fleet what-ifs, in process or on Spark"
    )
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
