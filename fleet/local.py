"""The in-process engine: the fleet job in this Python process, without Spark.

For fleets under the measured crossover (docs/performance.md, fleet) a JVM,
a Spark session and Python workers cost more than the units themselves.
This engine runs the same pieces the Spark job runs, in the same order:
:func:`rackplan.fleet.documents.choose_documents` picks the documents,
:func:`rackplan.fleet.documents.groups_of` splits them into groups,
:meth:`rackplan.fleet.stages.Evaluation.group` plans every unit of a group and
:func:`rackplan.fleet.outputs.write_partition` writes the tables of each
(cluster, date), so its files are byte for byte those of the Spark engine
(``tests/fleet/test_engines.py``).  It reads local paths and ``file://``
URIs only, and never imports pyspark: ``pip install rackplan`` runs it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .documents import Documents, choose_documents, groups_of, listing, read_local
from .outputs import make_dirs, snapshot_date, status_counts, write_partition
from .progress import Progress
from .runs import Phases, Summary, finish, new_run_id, run_id_of
from .scenarios import Scenario
from .settings import FleetOptions
from .stages import Evaluation
from .storage import InputError, LocalStore, check_inputs, local_path


def list_local(paths: Sequence[str], history: str) -> tuple[list[dict[str, Any]], Documents]:
    """Every document of the local ``paths`` (records of :func:`read_local`) and the choice among them.

    Files whose names start with ``_`` or ``.`` are skipped, as Spark skips them.
    """
    files = [f for f in check_inputs(paths) if not Path(f).name.startswith(("_", "."))]
    records = [{**r, **listing(r["value"], r["source"])} for r in read_local(files)]
    return records, choose_documents(records, history)


def partition_of(record: Mapping[str, Any]) -> tuple[str, str]:
    """The (cluster, date) folder a document's rows go to, when it parses (from its listing)."""
    return (str(record.get("cluster_id") or ""), snapshot_date(record.get("taken_at")) or "")


def run_local(
    paths: Sequence[str],
    scenarios: Sequence[Scenario],
    out: str | Path,
    options: FleetOptions,
    progress: Progress | None = None,
    run_id: str | None = None,
    listed: tuple[list[dict[str, Any]], Documents] | None = None,
) -> Summary:
    """The whole run in this process: the tables into a staging folder under ``out``, then the commit.

    ``listed``: the documents already read and chosen (:func:`list_local`), when the engine was
    picked by size.  Raises :class:`InputError` for paths that are not local or hold no document.
    """
    target = str(out).rstrip("/")
    if local_path(target) is None or any(local_path(p) is None for p in paths):
        raise InputError(
            "the local engine reads and writes local paths and file:// URIs only: use --engine spark"
        )
    phases = Phases(progress)
    phases.begin("reading", "list", announce=listed is None)  # else the caller read them, and said so
    records, chosen = listed if listed is not None else list_local(paths, options.history)
    run_id = run_id_of(chosen, scenarios, options, run_id or new_run_id())
    if chosen.documents == 0:
        raise InputError(f"--snapshots: no snapshot document in {', '.join(paths)}")
    run = Evaluation.of(scenarios, options)
    phases.begin("planning", "units", run.units(chosen))
    staging = f"{target}/_staging-{run_id}"
    root = str(local_path(staging))
    fs = _local_fs()
    make_dirs(root)
    counts: dict[str, tuple[int, float]] = {}

    def write(key: tuple[Any, Any], part: list[dict[str, Any]]) -> None:
        write_partition(fs, root, key[0], key[1], part, run_id, options.keep_plans)
        for status, (n, ms) in status_counts(part).items():
            had = counts.get(status, (0, 0.0))
            counts[status] = (had[0] + n, had[1] + ms)

    # One (cluster, date) at a time, written as soon as its documents are planned: the figures of one
    # partition in memory, not the fleet's.  A document that does not parse has its one row under its
    # file's name: those are kept to the end (a file can hold several).
    seen: set[str] = set()
    bad: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for _, batch in itertools.groupby(sorted(records, key=partition_of), key=partition_of):
        rows: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
        for group in groups_of(batch, chosen.keep, seen):
            done = run.group(group)
            for r in done:
                into = bad if r["kind"] == "snapshot" else rows
                into.setdefault((r["cluster_id"], r["snapshot_date"]), []).append(r)
            if progress is not None:
                progress.advance(len(done))
        for key, part in rows.items():
            write(key, part)
    del records
    phases.begin("writing", "tables")
    for key, part in sorted(bad.items(), key=lambda kv: str(kv[0])):
        write(key, part)
    phases.begin("commit", "commit")
    summary = Summary(
        out=target,
        run_id=run_id,
        elapsed_s=0.0,
        statuses={s: n for s, (n, _) in sorted(counts.items())},
        scenarios=[s.name for s in scenarios],
        settings=options.model_dump(mode="json"),
        snapshots=chosen.sources,
        documents=chosen.documents,
        partitions=1,
        assign_ms=sum(ms for _, ms in counts.values()),
        engine="local",
    )
    return finish(summary, LocalStore(), staging, phases)


def _local_fs() -> Any:
    from pyarrow import fs  # type: ignore[import-untyped,import-not-found,unused-ignore]

    return fs.LocalFileSystem()
