"""The fleet job on a local Spark: its figures are those of ``rackplan assign``, figure by figure.

One session-scoped ``local[2]`` SparkSession and one run of the job on a
small fleet feed every Spark test here (Spark takes half a minute to start on
two cores).  Skipped, with the reason, when pyspark or Java is missing.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import pytest

from rackplan.fleet import units
from rackplan.fleet.job import TABLES
from rackplan.fleet.scenarios import parse_scenarios
from rackplan.fleet.settings import FleetOptions, FleetSettings, SparkSettings
from rackplan.fleet.synthetic import cluster_document
from tests.fleet.test_units import assign_cli

SCENARIOS = [
    {"name": "lose-az-a", "kind": "lose_rack", "rack": "az-a"},
    {"name": "shift-to-c", "kind": "shift_members", "fraction": 0.5, "to_rack": "az-c", "seed": 4},
    {"name": "rf3", "kind": "raise_rf", "topic": "*", "replication_factor": 3, "seed": 1},
]
KEY = ["cluster_id", "kind", "group", "scenario", "assignor"]


@pytest.fixture(scope="module")
def fleet_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run over a folder given as a ``file://`` URI: a JSON-lines archive (cluster-00, an old and
    the newest snapshot), a Parquet archive (cluster-01, a ``document`` column) and a broken file."""
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    from rackplan.fleet.job import Progress, run_fleet

    base = tmp_path_factory.mktemp("fleet")
    snaps = base / "snapshots"
    (snaps / "2026" / "11").mkdir(parents=True)
    newest = [cluster_document(i, 4, seed=11, streams_apps=1) for i in range(2)]
    # History: an older snapshot of cluster-00 with a group that no longer exists.
    old = cluster_document(0, 5, seed=99)
    old["taken_at"] = "2026-01-01T00:00:00Z"
    old["consumer_groups"][-1]["group_id"] = "old-only"
    archive = [json.dumps(old), "", json.dumps(newest[0]), json.dumps(newest[0])]  # a line twice: once
    (snaps / "2026" / "11" / "cluster-00.jsonl").write_text("\n".join(archive) + "\n")
    older1 = {**newest[1], "taken_at": "2025-12-31T00:00:00Z"}
    pq.write_table(
        pa.table({"document": [json.dumps(older1), json.dumps(newest[1])]}), snaps / "cluster-01.parquet"
    )
    (snaps / "broken.json").write_text('{"schema": 1}')
    (snaps / "notes.txt").write_text("not a snapshot")
    (base / "out" / "locality").mkdir(parents=True)  # a previous run's table: replaced whole
    (base / "out" / "locality" / "stale.parquet").write_text("x")
    events: list[tuple[str, dict[str, Any]]] = []
    options = FleetOptions(keep_plans=True, progress_interval_s=1.0)
    with Progress(1.0, log=lambda event, **f: events.append((event, f))) as progress:
        summary = run_fleet(
            spark, [snaps.as_uri()], parse_scenarios(SCENARIOS), base / "out", options, progress, 4
        )
    return {"base": base, "out": base / "out", "summary": summary, "events": events, "newest": newest}


def table(run: dict[str, Any], name: str) -> Any:
    """A table as pandas: partition columns as text, ``taken_at`` as RFC 3339 text."""
    from rackplan.fleet.storage import read_table

    frame = read_table(str(run["out"] / name)).to_pandas()
    frame["taken_at"] = [
        "" if t is None or t != t else t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in frame["taken_at"]
    ]
    return frame


def expected_rows(docs: list[dict[str, Any]]) -> dict[tuple[str, ...], dict[str, Any]]:
    """The same units computed on the driver, without Spark."""
    out = {}
    scenarios = parse_scenarios(SCENARIOS)
    for doc in docs:
        for g in units.group_rows(json.dumps(doc)):
            for u in units.unit_rows(g, scenarios):
                r = units.evaluate(u, 0.02, keep_plans=True)
                out[tuple(r[k] for k in KEY)] = r
    return out


def _plain(v: Any) -> Any:
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

    if v is None or v is pd.NA or (isinstance(v, float) and v != v):
        return None
    return v.item() if hasattr(v, "item") else v


@pytest.mark.spark
def test_every_figure_equals_the_driver_side_computation(fleet_run: dict[str, Any]) -> None:
    loc = table(fleet_run, "locality")
    expected = expected_rows(fleet_run["newest"])
    got = {tuple(r[k] for k in KEY): r for r in loc.to_dict("records") if r["kind"] != "snapshot"}
    assert sorted(got) == sorted(expected)
    columns = [c for c, _ in units.RESULT_COLUMNS if c != "elapsed_ms"]
    for key, exp in expected.items():
        row = got[key]
        for c in columns:
            assert (
                _plain(row[c]) == pytest.approx(exp[c])
                if isinstance(exp[c], float)
                else _plain(row[c]) == exp[c]
            ), (key, c)
    assert {s: n for s, n in fleet_run["summary"].statuses.items()} == {
        **{
            st: sum(1 for r in expected.values() if r["status"] == st)
            for st in {r["status"] for r in expected.values()}
        },
        units.INVALID: 1,  # broken.json
    }


@pytest.mark.spark
def test_every_unit_replays_with_rackplan_assign(fleet_run: dict[str, Any]) -> None:
    loc = table(fleet_run, "locality")
    ok = loc[loc["status"] == units.OK]
    assert len(ok) >= 2 * 5 * 2 * 3  # 2 clusters x (4 groups + 1 app) x (baseline + lose-az-a at least) x 3
    for row in ok.to_dict("records"):
        plan = assign_cli(json.loads(row["instance"]))
        assert units.plan_digest(plan) == row["plan_sha256"]
        assert json.loads(row["plan"]) == units._without_elapsed(plan)
        if row["kind"] == "consumer":
            assert row["cross_rack_contract"] == plan["stats"]["cross_rack"]
            assert row["moved"] == plan["stats"]["moved"]
            settled = assign_cli(json.loads(row["settled_instance"])) if row["rounds"] > 1 else plan
            assert row["cross_nearest"] == settled["stats"]["cross_rack"]
            assert row["max_minus_min"] == settled["stats"]["max_minus_min"]
        else:
            stats = plan["stats"]
            assert row["cross_nearest"] == stats["active_cross_rack"] + stats["standby_cross_rack"]
            assert row["max_minus_min"] == pytest.approx(stats["max_minus_min_active_per_thread"])


@pytest.mark.spark
def test_newest_snapshot_only_and_bad_snapshots_reported(fleet_run: dict[str, Any]) -> None:
    loc = table(fleet_run, "locality")
    assert "old-only" not in set(loc["group"])
    assert set(loc.loc[loc["kind"] != "snapshot", "taken_at"]) == {"2026-11-21T22:00:00Z"}
    bad = loc[loc["kind"] == "snapshot"]
    assert len(bad) == 1 and bad.iloc[0]["status"] == units.INVALID
    assert bad.iloc[0]["cluster_id"].endswith("broken.json") and "cluster_id" in bad.iloc[0]["detail"]


@pytest.mark.spark
def test_derived_tables_agree_with_locality(fleet_run: dict[str, Any]) -> None:
    loc = table(fleet_run, "locality")
    ok = loc[loc["status"] == units.OK]
    cmp_ = table(fleet_run, "assignors")
    assert len(cmp_) == len(ok)
    assert (cmp_["saved_cross_nearest"] == cmp_["cross_nearest"] - cmp_["ref_cross_nearest"]).all()
    assert (
        cmp_["saved_cost_leader_usd_month"]
        - (cmp_["cost_leader_usd_month"] - cmp_["ref_cost_leader_usd_month"])
    ).abs().max() < 1e-9
    refs = cmp_[cmp_["assignor"] == cmp_["reference_assignor"]]
    assert len(refs) == len(ok) // 3 and (refs["saved_cross_nearest"] == 0).all()

    impact = table(fleet_run, "scenarios")
    assert set(impact["scenario"]) == {"lose-az-a", "shift-to-c", "rf3"}
    base = ok[ok["scenario"] == "baseline"].set_index(["cluster_id", "kind", "group", "assignor"])
    for r in impact.to_dict("records"):
        b = base.loc[(r["cluster_id"], r["kind"], r["group"], r["assignor"])]
        assert r["base_cross_nearest"] == b["cross_nearest"]
        if r["status"] == units.OK:
            assert r["delta_cross_nearest"] == r["cross_nearest"] - b["cross_nearest"]
        else:  # a scenario that does not apply to the group: said, with no figures
            assert r["status"] == units.NOT_APPLICABLE and r["detail"]
            assert (
                r["cross_nearest"] != r["cross_nearest"]
                and r["delta_cross_nearest"] != r["delta_cross_nearest"]
            )

    clusters = table(fleet_run, "clusters")
    sums = ok.groupby(["cluster_id", "scenario", "assignor"])[
        ["pairs", "cross_nearest", "cross_leader"]
    ].sum()
    for r in clusters[clusters["assignor"] != "registered"].to_dict("records"):
        s = sums.loc[(r["cluster_id"], r["scenario"], r["assignor"])]
        assert (r["pairs"], r["cross_nearest"], r["cross_leader"]) == tuple(s)
    registered = clusters[(clusters["assignor"] == "registered") & (clusters["scenario"] == "baseline")]
    assert int(registered["groups"].sum()) == 10  # each group once, with its own assignor


@pytest.mark.spark
def test_progress_summary_and_report(fleet_run: dict[str, Any]) -> None:
    summary = fleet_run["summary"]
    on_disk = json.loads((fleet_run["out"] / "summary.json").read_text())
    assert on_disk["units"] == summary.units and on_disk["run_id"] == summary.run_id
    assert on_disk["schema_version"] == 2 and on_disk["documents"] == 6  # 4 lines (one blank) + 2 rows + 1
    events = fleet_run["events"]
    phases = [f["phase"] for e, f in events if e == "fleet.phase"]
    assert phases == ["reading", "planning", "writing", "commit", "done"]
    counted = [f for e, f in events if e == "fleet.progress"]
    done = [f["done"] for f in counted]
    assert done == sorted(done) and done[-1] == summary.units  # monotonic, ends at every unit
    assert all(f["total"] == summary.units and "units_per_s" in f and "eta_s" in f for f in counted)
    pytest.importorskip("matplotlib", reason="the report needs matplotlib")
    from rackplan.fleet.report import render

    page = render(fleet_run["out"].as_uri(), fleet_run["base"] / "site")  # any URI
    assert (
        "cluster-01" in page.read_text()
        and (fleet_run["base"] / "site" / "cost_saved.png").stat().st_size > 0
    )


@pytest.mark.spark
def test_outputs_are_partitioned_typed_and_of_one_run(fleet_run: dict[str, Any]) -> None:
    """Partitioned by cluster and snapshot date, typed taken_at, one run_id in every table, no
    staging left, and the previous run's table replaced whole (its stray file is gone)."""
    from rackplan.fleet.storage import read_table

    out = fleet_run["out"]
    run_id = fleet_run["summary"].run_id
    assert sorted(p.name for p in out.iterdir()) == [*sorted(TABLES), "summary.json"]
    assert not (out / "locality" / "stale.parquet").exists()
    assert (out / "locality" / "cluster_id=cluster-00" / "snapshot_date=2026-11-21").is_dir()
    for name in TABLES:
        t = read_table(str(out / name))
        assert str(t.schema.field("taken_at").type) == "timestamp[us, tz=UTC]", name
        frame = table(fleet_run, name)
        assert set(frame["run_id"]) == {run_id} and set(frame["schema_version"]) == {2}, name
    loc = table(fleet_run, "locality")
    ok = loc[loc["kind"] != "snapshot"]
    assert set(ok["snapshot_date"]) == {"2026-11-21"} and set(ok["taken_at"]) == {"2026-11-21T22:00:00Z"}
    # One writer per (cluster, date): one file each, whatever the unit stage's partitions (4 here).
    folders = sorted(p.parent for p in (out / "locality").rglob("*.parquet"))
    assert len(folders) == len(set(folders)) >= 2


@pytest.mark.spark
def test_the_jvm_runs_with_the_cheap_defaults(spark: Any) -> None:
    """The session the job builds: the driver JVM (local mode: the executor too) with the client
    compiler only, and Spark SQL's code generation off."""
    jvm = spark.sparkContext._jvm
    args = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert "-XX:TieredStopAtLevel=1" in args
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"
    assert spark.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"


@pytest.mark.spark
def test_parquet_snapshots_with_the_documents_fields_as_columns(spark: Any, tmp_path: Path) -> None:
    """A Parquet archive whose columns are the documents' fields (not a ``document`` column) reads as
    the same snapshots, topics absent from a cluster (null struct fields) included."""
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    from rackplan.agent.cluster.archive import parse_snapshot
    from rackplan.fleet.documents import read_local
    from rackplan.fleet.job import read_documents

    docs = [cluster_document(i, 3, seed=5, streams_apps=1) for i in range(2)]
    docs[1]["topics"]["only-here"] = [[1]]
    pq.write_table(pa.Table.from_pylist(docs), tmp_path / "fleet.parquet")
    rows = read_documents(spark, [str(tmp_path)]).collect()
    got = sorted((parse_snapshot(json.loads(r["value"])) for r in rows), key=lambda s: s.cluster_id)
    assert got == [parse_snapshot(d) for d in docs]
    local = [parse_snapshot(json.loads(r["value"])) for r in read_local([str(tmp_path / "fleet.parquet")])]
    assert sorted(local, key=lambda s: s.cluster_id) == got  # the in-process engine reads the same


@pytest.mark.spark
def test_spark_jobs_are_named_by_run_and_phase(spark: Any, fleet_run: dict[str, Any]) -> None:
    tracker = spark.sparkContext.statusTracker()
    jobs = tracker.getJobIdsForGroup(f"rackplan-fleet-{fleet_run['summary'].run_id}")
    assert len(jobs) >= 2  # list; units and their tables


@pytest.mark.spark
def test_commit_through_the_hadoop_file_system(spark: Any, tmp_path: Path) -> None:
    """URI outputs (here ``file://``) commit and write summary.json through Hadoop's FileSystem API."""
    from rackplan.fleet.job import commit
    from rackplan.fleet.storage import HadoopStore

    out = tmp_path / "out"
    for d in (out / "locality", *(out / "_staging-r2" / n for n in TABLES)):
        d.mkdir(parents=True)
        (d / "part.parquet").write_text(str(d))
    commit(HadoopStore(spark), f"{out.as_uri()}/_staging-r2", out.as_uri(), "r2", '{"run_id": "r2"}\n')
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        *sorted(TABLES),
        "summary.json",
    ]
    assert (out / "locality" / "part.parquet").read_text().endswith("_staging-r2/locality")
    assert json.loads((out / "summary.json").read_text()) == {"run_id": "r2"}


@pytest.mark.spark
def test_only_invalid_snapshots_evaluate_no_unit(spark: Any, tmp_path: Path) -> None:
    from rackplan.fleet.job import EXIT_NO_UNIT_OK, exit_code, run_fleet

    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "a.jsonl").write_text('{"schema": 1}\n{"schema": 2, "cluster_id": "x"}\n')
    summary = run_fleet(
        spark, [str(tmp_path / "s" / "*.jsonl")], parse_scenarios([]), tmp_path / "o", FleetOptions(), None, 2
    )
    assert summary.statuses == {units.INVALID: 2}
    assert exit_code(summary.statuses) == EXIT_NO_UNIT_OK


# ---- settings and command line (no Spark) ---------------------------------------------


def test_settings_file_environment_and_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rackplan.fleet.job import add_arguments, settings_from_args

    f = tmp_path / "fleet.yaml"
    f.write_text("spark: {master: 'local[1]', executor_memory: 2g}\nfleet: {price_per_gb: 0.05}\n")
    monkeypatch.setenv("RACKPLAN_SPARK__EXECUTOR_MEMORY", "8g")
    monkeypatch.setenv("RACKPLAN_KAFKA__BOOTSTRAP_SERVERS", "elsewhere:9092")  # the agent's: ignored here
    s = FleetSettings.load(f)
    assert (s.spark.master, s.spark.executor_memory, s.fleet.price_per_gb) == ("local[1]", "8g", 0.05)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        [
            "--snapshots",
            "x",
            "--out",
            "o",
            "--settings",
            str(f),
            "--master",
            "local[2]",
            "--price-per-gb",
            "0.01",
        ]
    )
    s = settings_from_args(args)
    assert (s.spark.master, s.spark.executor_memory, s.fleet.price_per_gb) == ("local[2]", "8g", 0.01)
    assert s.fleet.history == "latest" and not s.fleet.keep_plans
    f.write_text("sparks: {}\n")
    with pytest.raises(ValueError, match="unknown keys sparks"):
        FleetSettings.load(f)
    with pytest.raises(ValueError):
        FleetOptions(consumer_assignors=("roundrobin",))


def test_session_conf_puts_the_users_jvm_options_last(tmp_path: Path) -> None:
    from rackplan.fleet.job import session_conf

    conf = session_conf(SparkSettings(), launches_driver=True)
    assert conf == {
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
        "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1",
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    }
    mine = SparkSettings(
        conf={"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=4 -Dx=1"}, codegen=True
    )
    assert session_conf(mine, launches_driver=True) == {
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:TieredStopAtLevel=4 -Dx=1",
        "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    }
    # Under spark-submit the driver JVM runs already: its options stay the user's.
    assert session_conf(mine, launches_driver=False)["spark.driver.extraJavaOptions"] == (
        "-XX:TieredStopAtLevel=4 -Dx=1"
    )
    assert "spark.driver.extraJavaOptions" not in session_conf(SparkSettings(), launches_driver=False)
    archive = tmp_path / "spark.jsa"
    log = "-Xlog:disable -Xlog:all=warning:stderr"  # JVM warnings off the summary's stdout
    plain = SparkSettings(jvm_options="", codegen=True, class_archive=str(archive))
    assert (
        session_conf(plain, launches_driver=True)
        == {
            "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={archive} {log}"  # the first run writes it
        }
    )
    archive.write_bytes(b"CDS")
    assert session_conf(plain, launches_driver=True) == {
        "spark.driver.extraJavaOptions": f"-XX:SharedArchiveFile={archive} {log}"  # the next ones map it
    }
    assert session_conf(plain, launches_driver=False) == {}


def test_fleet_command_reports_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rackplan.cli import main

    assert main(["fleet", "--snapshots", str(tmp_path / "none"), "--out", str(tmp_path / "o")]) == 2
    assert "no such snapshot file" in capsys.readouterr().err
    bad = tmp_path / "s.yaml"
    bad.write_text("- {name: baseline, kind: lose_rack, rack: a}\n")
    (tmp_path / "c.json").write_text("{}")
    assert (
        main(["fleet", "--snapshots", str(tmp_path / "c.json"), "--scenarios", str(bad), "--out", "o"]) == 2
    )
    assert "reserved" in capsys.readouterr().err


def test_snapshot_paths_are_checked_before_spark(tmp_path: Path) -> None:
    from rackplan.fleet.storage import InputError, check_inputs

    (tmp_path / "a" / "deep").mkdir(parents=True)
    (tmp_path / "a" / "deep" / "x.jsonl").write_text("{}\n")
    (tmp_path / "a" / "y.parquet").write_text("")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("")
    assert check_inputs([str(tmp_path / "a")]) == [
        str(tmp_path / "a" / "deep" / "x.jsonl"),
        str(tmp_path / "a" / "y.parquet"),
    ]
    assert check_inputs([(tmp_path / "a").as_uri() + "/*/*.jsonl"]) == [
        str(tmp_path / "a" / "deep" / "x.jsonl")
    ]
    assert check_inputs(["hdfs://nn/snapshots/*.jsonl"]) == []  # Spark lists other schemes
    for paths, message in (
        ([str(tmp_path / "missing")], "no such snapshot file or directory"),
        ([(tmp_path / "missing").as_uri()], "no such snapshot file or directory"),
        ([str(tmp_path / "a" / "*.json")], "no file matches"),
        ([str(tmp_path / "empty")], "no snapshot files"),
    ):
        with pytest.raises(InputError, match=message):
            check_inputs(paths)


def test_spark_errors_map_to_exit_codes() -> None:
    from rackplan.fleet.job import EXIT_BAD_INPUT, EXIT_INFRASTRUCTURE, classify, exit_code

    code, line = classify(RuntimeError("[PATH_NOT_FOUND] Path does not exist: hdfs://nn/x."))
    assert code == EXIT_BAD_INPUT and "hdfs://nn/x" in line
    corrupt = "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:/s/x.parquet.\n"
    code, line = classify(
        RuntimeError(corrupt + "Caused by: x.parquet is not a Parquet file. Expected magic")
    )
    assert code == EXIT_BAD_INPUT and line.startswith("--snapshots: ") and "file:/s/x.parquet" in line
    code, line = classify(
        RuntimeError("PythonException:\n  ModuleNotFoundError: No module named 'pyarrow'\n")
    )
    assert (
        code == EXIT_INFRASTRUCTURE and "No module named 'pyarrow'" in line and "ship the environment" in line
    )
    assert classify(RuntimeError("Connection refused"))[0] == EXIT_INFRASTRUCTURE
    assert exit_code({"ok": 3, "failed": 1}) == 1
    assert exit_code({"ok": 3, "n/a": 2}) == 0
    assert exit_code({"invalid": 2}) == 4 and exit_code({}) == 4


def test_partitions_are_sized_from_the_unit_count() -> None:
    from rackplan.fleet.job import partitions_for

    assert partitions_for(90, 10, 2) == 2  # a small fleet: one wave, one partition per core
    assert partitions_for(1_200, 100, 2) == 4
    assert partitions_for(24_000, 2_000, 2) == 16  # at most eight waves
    assert partitions_for(24_000, 3, 2) == 3  # never more than the groups
    assert partitions_for(24_000, 2_000, 2, configured=5) == 5


def test_progress_events_are_monotonic_with_rate_and_eta() -> None:
    from rackplan.fleet.job import Progress

    events: list[tuple[str, dict[str, Any]]] = []
    values = iter([10, 5, 40, 200])  # an accumulator read while tasks end (and a stale read)
    with Progress(0.05, log=lambda event, **f: events.append((event, f))) as progress:
        progress.set_phase("planning", 100, lambda: next(values, 200), then="writing")
        deadline = time.monotonic() + 10
        while not any(f.get("phase") == "writing" for _, f in events) and time.monotonic() < deadline:
            time.sleep(0.05)
        progress.set_phase("commit")
    counted = [f for e, f in events if e == "fleet.progress"]
    done = [f["done"] for f in counted]
    assert done[0] == 10 and done == sorted(done) and done[-1] == 100  # never back (5), capped at the total
    assert all(f["total"] == 100 and f["eta_s"] is not None and f["units_per_s"] > 0 for f in counted)
    phases = [f["phase"] for e, f in events if e == "fleet.phase"]
    assert phases == ["planning", "writing", "commit"]  # writing: once every unit is counted


def test_no_spark_context_needed_on_the_hot_path() -> None:
    """Spark Connect sessions have no ``sparkContext``: sizing, job names and progress do without it."""
    from rackplan.fleet.job import _name_jobs, context, parallelism

    class Conf:
        def get(self, key: str, default: str) -> str:
            return {"spark.default.parallelism": "6"}.get(key, default)

    class ConnectSession:
        def __init__(self) -> None:
            self.conf = Conf()
            self.tags: list[str] = []

        @property
        def sparkContext(self) -> Any:
            raise RuntimeError("[JVM_ATTRIBUTE_NOT_SUPPORTED] sparkContext is not supported in Spark Connect")

        def addTag(self, tag: str) -> None:
            self.tags.append(tag)

    session = ConnectSession()
    assert context(session) is None and parallelism(session) == 6
    _name_jobs(session, "r1", "units (rackplan assign on every unit)")
    assert session.tags == ["rackplan-fleet-units"]
