"""The two engines of ``rackplan fleet``: the in-process one writes the Spark job's files byte for byte,
never imports pyspark, is chosen by size, and reports progress from its first second."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rackplan.fleet import units
from rackplan.fleet.scenarios import parse_scenarios
from rackplan.fleet.settings import FleetOptions
from rackplan.fleet.synthetic import cluster_document

pytest.importorskip("pyarrow", reason="the fleet tables are written with pyarrow")

SCENARIOS = [
    {"name": "lose-az-a", "kind": "lose_rack", "rack": "az-a"},
    {"name": "shift-to-c", "kind": "shift_members", "fraction": 0.5, "to_rack": "az-c", "seed": 4},
    {"name": "no-match", "kind": "raise_rf", "topic": "zzz*", "replication_factor": 3},
]
ROOT = Path(__file__).resolve().parents[2]


def write_fleet(snaps: Path) -> None:
    """Every kind of input: a JSON-lines archive with history, a repeated line and a line of blanks, a
    Parquet archive (a ``document`` column), a broken file whose name Hadoop and Python spell differently,
    a newer document that repeats its ``cluster_id`` key (JSON parsers disagree on which one wins), a
    hidden file."""
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    (snaps / "deep").mkdir(parents=True)
    newest = [cluster_document(i, 4, seed=11, streams_apps=1) for i in range(3)]
    old = cluster_document(0, 5, seed=99)
    old["taken_at"] = "2026-11-20T23:30:00+01:00"  # another day in UTC, the same cluster
    lines = [json.dumps(old), " \t ", json.dumps(newest[0]), json.dumps(newest[0])]
    (snaps / "deep" / "cluster-00.jsonl").write_text("\r\n".join(lines) + "\n")
    older1 = {**newest[1], "taken_at": "2025-12-31T00:00:00Z"}
    pq.write_table(
        pa.table({"document": [json.dumps(older1), json.dumps(newest[1])]}), snaps / "cluster-01.parquet"
    )
    (snaps / "cluster-02.json").write_text(json.dumps(newest[2]))
    (snaps / "broken é+(1)!,x y.json").write_text('{"schema": 1}')
    twice = json.dumps({**newest[2], "taken_at": "2026-11-22T00:00:00Z", "cluster_id": "cluster-zz"})
    (snaps / "twice.json").write_text('{"cluster_id": "cluster-02", ' + twice[1:])
    (snaps / "_hidden.json").write_text("{")  # skipped by both, as Spark skips it


def file_digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "summary.json"
    }


@pytest.mark.spark
def test_both_engines_write_the_same_bytes(spark: Any, tmp_path: Path) -> None:
    from rackplan.fleet.job import run_fleet
    from rackplan.fleet.local import run_local

    snaps = tmp_path / "snapshots"
    write_fleet(snaps)
    scenarios = parse_scenarios(SCENARIOS)
    options = FleetOptions(history="all", keep_plans=True, unit_timings=False)
    local = run_local([str(snaps)], scenarios, tmp_path / "local", options, run_id="r1")
    on_spark = run_fleet(spark, [str(snaps)], scenarios, tmp_path / "spark", options, None, 3, run_id="r1")
    a, b = file_digests(tmp_path / "local"), file_digests(tmp_path / "spark")
    assert sorted(a) == sorted(b) and a == b
    assert len([f for f in a if f.startswith("locality/")]) == 7  # 3 clusters, 2 dates of cluster-00, 2 bad
    assert local.statuses == on_spark.statuses and local.statuses[units.INVALID] == 2
    assert "locality/cluster_id=file%3A%2F" in str(sorted(a)) and "é+(1)!,x%2520y.json" in str(sorted(a))
    differ = {"elapsed_s", "timings_s", "engine", "partitions", "out"}
    sa, sb = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("local", "spark"))
    assert {k: v for k, v in sa.items() if k not in differ} == {
        k: v for k, v in sb.items() if k not in differ
    }
    assert (sa["engine"], sb["engine"]) == ("local", "spark")


def test_the_tables_do_not_depend_on_the_order_of_the_rows(tmp_path: Path) -> None:
    """What lets two engines agree: a (cluster, date)'s files are a function of its set of rows."""
    from pyarrow import fs

    from rackplan.fleet.outputs import write_partition
    from rackplan.fleet.stages import Evaluation

    run = Evaluation.of(parse_scenarios(SCENARIOS), FleetOptions(unit_timings=False))
    rows = [r for g in units.group_rows(json.dumps(cluster_document(0, 5, seed=3))) for r in run.group(g)]
    shuffled = rows[:]
    random.Random(7).shuffle(shuffled)
    for name, part in (("a", rows), ("b", shuffled)):
        write_partition(
            fs.LocalFileSystem(), str(tmp_path / name), "cluster-00", "2026-11-21", part, "r", False
        )
    assert file_digests(tmp_path / "a") == file_digests(tmp_path / "b")
    assert len(file_digests(tmp_path / "a")) == 4


def test_partition_values_as_hive_writes_them() -> None:
    from rackplan.fleet.outputs import partition_folder, snapshot_date

    assert partition_folder("cluster_id", "file:/x/a b.json") == "cluster_id=file%3A%2Fx%2Fa b.json"
    assert partition_folder("snapshot_date", None) == "snapshot_date=__HIVE_DEFAULT_PARTITION__"
    assert snapshot_date("2026-11-20T23:30:00-02:00") == "2026-11-21"
    assert snapshot_date("2026-11-21T22:00:00Z") == "2026-11-21"
    assert snapshot_date("yesterday") is None and snapshot_date("") is None


def _run_cli(args: list[str], block_pyspark: bool, blocked: tuple[str, ...] = ()) -> dict[str, Any]:
    """``rackplan fleet`` in a fresh interpreter; reports its exit code, its stdout and the pyspark
    modules it imported (``block_pyspark``: as if pyspark were not installed; ``blocked``: these too)."""
    missing = (*blocked, *(("pyspark",) if block_pyspark else ()))
    code = textwrap.dedent(
        f"""
        import contextlib, io, json, sys
        for name in {missing!r}:
            sys.modules[name] = None  # import raises ImportError
        from rackplan.cli import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main({args!r})
        print(json.dumps({{"rc": rc, "out": out.getvalue(),
                          "spark": sorted(m for m in sys.modules if m.startswith(("pyspark", "py4j")))}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr
    return result


def test_small_fleets_run_in_process_without_pyspark(tmp_path: Path) -> None:
    snaps = tmp_path / "snapshots"
    write_fleet(snaps)
    base = ["fleet", "--snapshots", str(snaps), "--out", str(tmp_path / "out"), "--progress", "0"]
    done = _run_cli(base, block_pyspark=False)  # engine auto, a small fleet: in process
    assert done["rc"] == 0 and done["spark"] == []
    summary = json.loads(done["out"])
    assert summary["engine"] == "local" and summary["statuses"]["ok"] > 0
    assert (tmp_path / "out" / "locality").is_dir()
    events = [json.loads(line) for line in done["stderr"].splitlines() if line.startswith('{"')]
    phases = [e["phase"] for e in events if e["event"] == "fleet.phase"]
    assert phases == ["reading", "planning", "writing", "commit", "done"]  # each once, on stderr
    assert not [e for e in events if str(e.get("logger", "")).startswith("rackplan.assignor")]  # per unit
    blocked = _run_cli([*base, "--engine", "local"], block_pyspark=True)  # pyspark not installed
    assert blocked["rc"] == 0 and json.loads(blocked["out"])["statuses"] == summary["statuses"]
    no_spark = _run_cli([*base, "--engine", "spark"], block_pyspark=True)
    assert no_spark["rc"] == 2 and "--engine local" in no_spark["stderr"]
    assert "Traceback" not in no_spark["stderr"]


def test_without_pyarrow_the_fleet_names_the_extra_to_install(tmp_path: Path) -> None:
    # pyarrow (170 MB installed) is the fleet extra's, not the agent image's: a plain install runs the
    # agent and `assign`, and `rackplan fleet` says what to install instead of a traceback.
    snaps = tmp_path / "snapshots"
    write_fleet(snaps)
    base = ["fleet", "--snapshots", str(snaps), "--out", str(tmp_path / "out"), "--progress", "0"]
    done = _run_cli(base, block_pyspark=True, blocked=("pyarrow",))
    assert done["rc"] == 2 and "rackplan[fleet]" in done["stderr"], done["stderr"][-2000:]
    assert "Traceback" not in done["stderr"]
    assert not (tmp_path / "out").exists()


def test_the_engine_is_chosen_by_size_and_overridable() -> None:
    from rackplan.fleet.job import choose_engine

    def count(n: int) -> Any:
        return lambda: n

    auto = FleetOptions(local_max_units=1_000)
    assert choose_engine(auto, ["snaps/"], "out", count(1_000)) == "local"
    assert choose_engine(auto, ["snaps/"], "out", count(1_001)) == "spark"
    assert choose_engine(auto, ["hdfs://nn/snaps"], "out", count(1)) == "spark"  # not counted here
    assert choose_engine(auto, ["snaps/"], "s3a://bucket/out", count(1)) == "spark"
    assert choose_engine(FleetOptions(engine="local"), ["snaps/"], "out", count(10**9)) == "local"
    assert choose_engine(FleetOptions(engine="spark"), ["snaps/"], "out", count(1)) == "spark"


def test_progress_starts_before_the_first_unit_and_the_counts_add_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rackplan.fleet.local import run_local
    from rackplan.fleet.progress import Progress

    snaps = tmp_path / "snapshots"
    write_fleet(snaps)
    log: list[tuple[str, dict[str, Any]]] = []
    evaluate = units.evaluate_unit

    def planned(*args: Any, **kwargs: Any) -> dict[str, Any]:
        log.append(("unit planned", {}))
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(units, "evaluate_unit", planned)
    progress = Progress(0, log=lambda event, **f: log.append((event, f)))
    summary = run_local([str(snaps)], parse_scenarios(SCENARIOS), tmp_path / "out", FleetOptions(), progress)
    events = [e for e, _ in log]
    first_unit = events.index("unit planned")
    phases = [f["phase"] for e, f in log if e == "fleet.phase"]
    assert phases == ["reading", "planning", "writing", "commit", "done"]
    assert events[:2] == ["fleet.phase", "fleet.phase"] and first_unit == 2  # reading, planning, then units
    planning = next(f for e, f in log if e == "fleet.phase" and f["phase"] == "planning")
    assert planning["total_units"] == summary.units  # the total is known before the first unit
    final = [f for e, f in log if e == "fleet.progress"]
    assert final[-1]["done"] == final[-1]["total"] == summary.units == sum(summary.statuses.values())
    assert final[-1]["eta_s"] == 0 and final[-1]["units_per_s"] > 0
