"""The fleet job on a local Spark: its figures are those of ``rackplan assign``, figure by figure.

One session-scoped ``local[2]`` SparkSession and one run of the job on a
small fleet feed every Spark test here (Spark takes half a minute to start on
two cores).  Skipped, with the reason, when pyspark or Java is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.fleet import units
from agent.fleet.scenarios import parse_scenarios
from agent.fleet.settings import FleetOptions, FleetSettings, SparkSettings
from agent.fleet.synthetic import cluster_document
from tests.test_fleet_units import assign_cli

SCENARIOS = [
    {"name": "lose-az-a", "kind": "lose_rack", "rack": "az-a"},
    {"name": "shift-to-c", "kind": "shift_members", "fraction": 0.5, "to_rack": "az-c", "seed": 4},
    {"name": "rf3", "kind": "raise_rf", "topic": "*", "replication_factor": 3, "seed": 1},
]
KEY = ["cluster_id", "kind", "group", "scenario", "assignor"]


def _spark_missing() -> str | None:
    try:
        import pandas  # type: ignore[import-untyped,unused-ignore]  # noqa: F401
        import pyarrow  # type: ignore[import-untyped,unused-ignore]  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as e:
        return f"the spark extra is not installed ({e.name}): pip install -e '.[spark]'"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no java on PATH and no JAVA_HOME: Spark needs Java 17+"
    return None


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    reason = _spark_missing()
    if reason:
        pytest.skip(reason)
    from agent.fleet.job import build_session

    session = build_session(SparkSettings(master="local[2]", partitions=4, arrow_batch_rows=16))
    yield session
    session.stop()


@pytest.fixture(scope="module")
def fleet_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from agent.fleet.job import Progress, run_fleet

    base = tmp_path_factory.mktemp("fleet")
    snaps = base / "snapshots"
    snaps.mkdir()
    newest = [cluster_document(i, 4, seed=11, streams_apps=1) for i in range(2)]
    for doc in newest:
        (snaps / f"{doc['cluster_id']}.json").write_text(json.dumps(doc))
    # History: an older snapshot of cluster-00 with a group that no longer exists.
    old = cluster_document(0, 5, seed=99)
    old["taken_at"] = "2026-01-01T00:00:00Z"
    old["consumer_groups"][-1]["group_id"] = "old-only"
    (snaps / "archive.jsonl").write_text(json.dumps(old) + "\n\n")
    (snaps / "broken.json").write_text('{"schema": 1}')
    lines: list[str] = []
    options = FleetOptions(keep_plans=True, progress_interval_s=1.0)
    with Progress(spark, 1.0, write=lines.append) as progress:
        summary = run_fleet(
            spark, [str(snaps)], parse_scenarios(SCENARIOS), base / "out", options, progress, 4
        )
    return {"base": base, "out": base / "out", "summary": summary, "lines": lines, "newest": newest}


def table(run: dict[str, Any], name: str) -> Any:
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

    return pd.read_parquet(run["out"] / name)


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


@pytest.mark.spark
def test_every_unit_replays_with_rackplan_assign(fleet_run: dict[str, Any]) -> None:
    loc = table(fleet_run, "locality")
    ok = loc[loc["status"] == units.OK]
    assert (
        len(ok) == 2 * 5 * 4 * 3
    )  # 2 clusters x (4 groups + 1 app) x (baseline + 3 scenarios) x 3 assignors
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
        assert r["delta_cross_nearest"] == r["cross_nearest"] - b["cross_nearest"]

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
    assert summary.statuses == {units.INVALID: 1, units.OK: 120}
    assert json.loads((fleet_run["out"] / "summary.json").read_text())["units"] == 121
    assert fleet_run["lines"] and all(line.startswith("rackplan fleet: ") for line in fleet_run["lines"])
    assert any("locality" in line for line in fleet_run["lines"])
    pytest.importorskip("matplotlib", reason="the report needs matplotlib")
    from agent.fleet.report import render

    page = render(fleet_run["out"], fleet_run["base"] / "site")
    assert (
        "cluster-01" in page.read_text()
        and (fleet_run["base"] / "site" / "cost_saved.png").stat().st_size > 0
    )


# ---- settings and command line (no Spark) ---------------------------------------------


def test_settings_file_environment_and_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.fleet.job import add_arguments, settings_from_args

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


def test_fleet_command_reports_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from assignor.cli import main

    assert main(["fleet", "--snapshots", str(tmp_path / "none"), "--out", str(tmp_path / "o")]) == 2
    assert "no such snapshot file" in capsys.readouterr().err
    bad = tmp_path / "s.yaml"
    bad.write_text("- {name: baseline, kind: lose_rack, rack: a}\n")
    (tmp_path / "c.json").write_text("{}")
    assert (
        main(["fleet", "--snapshots", str(tmp_path / "c.json"), "--scenarios", str(bad), "--out", "o"]) == 2
    )
    assert "reserved" in capsys.readouterr().err
