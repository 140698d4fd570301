"""A unit's figures are those of ``rackplan assign`` on the unit's instance (no Spark needed)."""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.assignor.contract import instance_document
from rackplan.cli import main as rackplan
from rackplan.fleet import units
from rackplan.fleet.labels import BYTES_OPTIMAL, REFERENCE_CONSUMER
from rackplan.fleet.scenarios import parse_scenarios
from tests.strategies import clusters, consumer_groups


def assign_cli(instance: dict[str, Any]) -> dict[str, Any]:
    """``rackplan assign INSTANCE.json`` in-process: the plan it prints."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d, "instance.json")
        path.write_text(json.dumps(instance), encoding="utf-8")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert rackplan(["assign", str(path)]) == 0
    plan: dict[str, Any] = json.loads(out.getvalue())
    return plan


def snapshot_doc(
    instance: dict[str, Any], traffic: dict[str, Any], leaders: dict[str, Any] | None = None
) -> str:
    key = "consumer_groups" if "consumer_group" in instance else "streams_apps"
    body = instance.get("consumer_group") or instance["streams_app"]
    doc = {
        "schema": 1,
        "cluster_id": "c",
        "taken_at": "2026-11-21T22:00:00Z",
        **instance["cluster"],
        key: [body],
        "traffic": traffic,
    }
    if leaders:
        doc["leaders"] = leaders
    return json.dumps(doc)


def all_units(
    text: str, scenarios: list[dict[str, Any]] | None = None, keep: bool = True
) -> list[dict[str, Any]]:
    out = []
    for g in units.group_rows(text):
        for u in units.unit_rows(g, parse_scenarios(scenarios or [])):
            out.append(units.evaluate(u, 0.02, keep_plans=keep))
    return out


def recount(
    instance: dict[str, Any],
    plan: dict[str, Any],
    traffic: dict[str, list[float]],
    leaders: dict[str, list[int]],
) -> dict[str, Any]:
    """Locality figures counted from scratch, the slow obvious way."""
    rack = {b["id"]: b["rack"] for b in instance["cluster"]["brokers"]}
    members = {m["member_id"]: m.get("rack") for m in instance["consumer_group"]["members"]}
    out = {"cross_nearest": 0, "cross_leader": 0, "cross_bytes_nearest": 0.0, "cross_bytes_leader": 0.0}
    out |= {"unfixable_bytes_nearest": 0.0, "unfixable_bytes_leader": 0.0}

    def near(r: str | None, t: str, p: int) -> bool:
        racks = {rack[b] for b in instance["cluster"]["topics"][t][p]} - {None}
        return r is not None and bool(racks) and r not in racks

    def far(r: str | None, t: str, p: int) -> bool:
        lead = leaders[t][p]
        return r is not None and lead != -1 and rack[lead] is not None and rack[lead] != r

    for mid, parts in plan["consumer_group"]["assignment"].items():
        r = members[mid]
        for t, p in parts:
            out["cross_nearest"] += near(r, t, p)
            out["cross_leader"] += far(r, t, p)
            out["cross_bytes_nearest"] += traffic[t][p] if near(r, t, p) else 0.0
            out["cross_bytes_leader"] += traffic[t][p] if far(r, t, p) else 0.0
            # the floor: cross-rack from every member's rack, whoever reads it
            if all(near(m, t, p) for m in members.values()):
                out["unfixable_bytes_nearest"] += traffic[t][p]
            if all(far(m, t, p) for m in members.values()):
                out["unfixable_bytes_leader"] += traffic[t][p]
    return out


INSTANCE: dict[str, Any] = {
    "cluster": {
        "brokers": [{"id": 1, "rack": "az-a"}, {"id": 2, "rack": "az-b"}, {"id": 3, "rack": "az-c"}],
        "topics": {"orders": [[1, 2], [2, 3], [3, 1], [1, 2], [2, 3], [3, 1]]},
    },
    "consumer_group": {
        "group_id": "pay",
        "assignor": "range",
        "members": [
            {"member_id": "m-1", "rack": "az-a", "topics": ["orders"]},
            {"member_id": "m-2", "rack": "az-b", "topics": ["orders"]},
            {"member_id": "m-3", "rack": None, "topics": ["orders"]},
        ],
    },
}
TRAFFIC = {"orders": [1e6, 2e6, 3e6, 4e6, 5e6, 6e6]}


def test_units_of_a_group_cover_every_scenario_and_assignor() -> None:
    rows = all_units(
        snapshot_doc(INSTANCE, TRAFFIC), [{"name": "lose-c", "kind": "lose_rack", "rack": "az-c"}]
    )
    assert [(r["scenario"], r["assignor"]) for r in rows] == [
        (s, a) for s in ("baseline", "lose-c") for a in ("range", "cooperative-sticky", "rack-optimal")
    ]
    assert all(r["status"] == units.OK for r in rows)
    assert [r["registered"] for r in rows[:3]] == [True, False, False]
    assert [r["reference"] for r in rows[:3]] == [False, False, True]
    # The registered assignor reproduces the current assignment: nothing moves.
    assert rows[0]["moved"] == 0


def test_figures_equal_rackplan_assign_and_a_recount() -> None:
    leaders = {"orders": [2, 3, 1, 2, 3, 1]}
    for row in all_units(snapshot_doc(INSTANCE, TRAFFIC, leaders)):
        instance = json.loads(row["instance"])
        plan = assign_cli(instance)
        assert units.plan_digest(plan) == row["plan_sha256"]
        assert row["plan"] == units.dumps(units._without_elapsed(plan))
        assert row["cross_rack_contract"] == plan["stats"]["cross_rack"]
        assert row["moved"] == plan["stats"]["moved"]
        settled = assign_cli(json.loads(row["settled_instance"])) if row["settled_instance"] else plan
        assert row["max_minus_min"] == settled["stats"]["max_minus_min"]
        expected = recount(instance, settled, TRAFFIC, leaders)
        for key, value in expected.items():
            assert row[key] == pytest.approx(value), key
        assert row["bytes_per_s"] == pytest.approx(sum(TRAFFIC["orders"]))
        assert row["cost_nearest_usd_month"] == pytest.approx(
            expected["cross_bytes_nearest"] * 730 * 3600 / 1e9 * 0.02
        )
        assert row["cost_leader_usd_month"] == pytest.approx(
            expected["cross_bytes_leader"] * 730 * 3600 / 1e9 * 0.02
        )


def test_cooperative_units_settle_in_a_second_round() -> None:
    inst = json.loads(json.dumps(INSTANCE))
    inst["consumer_group"]["assignor"] = "cooperative-sticky"
    # m-3 owns everything: the cooperative plan withholds what must move, then assigns it.
    inst["consumer_group"]["members"][2]["owned"] = [["orders", p] for p in range(6)]
    inst["consumer_group"]["members"][2]["generation"] = 4
    row = next(r for r in all_units(snapshot_doc(inst, TRAFFIC)) if r["assignor"] == "cooperative-sticky")
    first = assign_cli(json.loads(row["instance"]))
    assert first["consumer_group"]["revoked"] and row["revoked"] == sum(
        len(v) for v in first["consumer_group"]["revoked"].values()
    )
    assert row["rounds"] == 2
    settled = assign_cli(json.loads(row["settled_instance"]))
    assert not any(settled["consumer_group"]["revoked"].values())
    assert settled["stats"]["assigned"] == 6
    assert row["pairs"] == 6  # figures are those of the settled assignment
    assert row["cross_nearest"] == settled["stats"]["cross_rack"]


def test_invalid_registrations_and_scenarios_are_reported_not_raised() -> None:
    bad = json.loads(json.dumps(INSTANCE))
    bad["consumer_group"]["members"][0]["topics"] = ["missing"]
    rows = all_units(snapshot_doc(bad, TRAFFIC), [{"name": "x", "kind": "lose_rack", "rack": "az-q"}])
    assert {r["status"] for r in rows} == {units.INVALID}
    assert "unknown topic 'missing'" in rows[0]["detail"]
    rows = all_units(snapshot_doc(INSTANCE, TRAFFIC), [{"name": "x", "kind": "lose_rack", "rack": "az-q"}])
    assert [r["status"] for r in rows[3:]] == [units.NOT_APPLICABLE] * 3
    assert units.group_rows("{not json", "f.json")[0]["status"] == units.INVALID


@pytest.mark.parametrize(
    "scenario",
    [
        {"name": "x", "kind": "raise_rf", "topic": "invoices*", "replication_factor": 3},
        {"name": "x", "kind": "shift_members", "fraction": 1.0, "to_rack": "az-c", "groups": "other-*"},
        {"name": "x", "kind": "move_replicas", "topic": "invoices", "count": 2},
        {"name": "x", "kind": "shift_members", "fraction": 0.1, "to_rack": "az-c"},  # rounds to no member
    ],
)
def test_a_scenario_that_matches_nothing_of_a_group_is_not_applicable(scenario: dict[str, Any]) -> None:
    """Not ``ok`` rows that repeat the baseline's numbers (issue 15): ``n/a``, with the reason."""
    rows = all_units(snapshot_doc(INSTANCE, TRAFFIC), [scenario])
    assert [r["status"] for r in rows] == [units.OK] * 3 + [units.NOT_APPLICABLE] * 3
    assert all("changes nothing" in r["detail"] and r["cross_nearest"] is None for r in rows[3:])


def test_one_pass_group_results_equal_the_staged_rows() -> None:
    """What the job runs (all units of a group in one call) equals unit_rows then evaluate, row for row."""
    scenarios: list[dict[str, Any]] = [
        {"name": "lose-c", "kind": "lose_rack", "rack": "az-c"},
        {"name": "none", "kind": "raise_rf", "topic": "zzz", "replication_factor": 3},
        {"name": "gone", "kind": "lose_rack", "rack": "az-q"},
    ]
    text = snapshot_doc(INSTANCE, TRAFFIC)
    staged = all_units(text, scenarios)
    (group,) = units.group_rows(text)
    one_pass = units.group_results(group, parse_scenarios(scenarios), 0.02, keep_plans=True)

    def strip(r: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in r.items() if k != "elapsed_ms"}

    assert [strip(r) for r in one_pass] == [strip(r) for r in staged]
    assert [r["status"] for r in one_pass].count(units.NOT_APPLICABLE) == 6


def test_comparisons_are_the_reference_and_the_baseline_of_the_same_group() -> None:
    """What the job's ``assignors`` and ``scenarios`` tables read: every row gets the figures of the
    ok reference-assignor row of its scenario and of the ok baseline row of its assignor; a
    scenario whose units did not run (``n/a``) has no reference figures, but keeps its baseline."""
    scenarios: list[dict[str, Any]] = [
        {"name": "lose-c", "kind": "lose_rack", "rack": "az-c"},
        {"name": "gone", "kind": "lose_rack", "rack": "az-q"},
    ]
    (group,) = units.group_rows(snapshot_doc(INSTANCE, TRAFFIC))
    rows = units.group_results(group, parse_scenarios(scenarios))
    other = [{**r, "group": "other", "cross_nearest": 10**6} for r in rows]  # another group: never mixed in
    got = units.with_comparisons(rows + other)[: len(rows)]
    assert len(got) == len(rows) == 9 and [{k: r[k] for k in rows[0]} for r in got] == rows
    for r in got:
        ref = next(x for x in rows if x["scenario"] == r["scenario"] and x["reference"])
        base = next(x for x in rows if x["scenario"] == "baseline" and x["assignor"] == r["assignor"])
        if ref["status"] == units.OK:
            assert r["reference_assignor"] == REFERENCE_CONSUMER == ref["assignor"]
            assert all(r[f"ref_{c}"] == ref[c] for c, _ in units.COMPARED)
        else:
            assert r["scenario"] == "gone" and "reference_assignor" not in r and "ref_moved" not in r
        assert all(r[f"base_{c}"] == base[c] for c, _ in units.COMPARED)
    assert {r["scenario"] for r in got if "ref_cross_nearest" in r} == {"baseline", "lose-c"}
    assert {k for k, _ in units.COMPARISON_COLUMNS} <= set(got[0])


def test_unknown_traffic_counts_nothing() -> None:
    rows = all_units(snapshot_doc(INSTANCE, {"orders": [None, None, None, None, None, 10.0]}))
    for r in rows:
        assert r["pairs"] == 6 and r["pairs_with_traffic"] == 1
        assert r["bytes_per_s"] == 10.0


STREAMS: dict[str, Any] = {
    "cluster": {
        "brokers": [{"id": 1, "rack": "az-a"}, {"id": 2, "rack": "az-b"}, {"id": 3, "rack": "az-c"}],
        "topics": {"clicks": [[1], [2], [3], [1]], "store-changelog": [[2], [3], [1], [2]]},
    },
    "streams_app": {
        "application_id": "app",
        "subtopologies": [
            {
                "id": "0",
                "source_topics": ["clicks"],
                "changelog_topics": ["store-changelog"],
                "stateful": True,
            }
        ],
        "clients": [
            {"process_id": "p-1", "rack": "az-a", "threads": 1},
            {"process_id": "p-2", "rack": "az-b", "threads": 1},
        ],
        "num_standby_replicas": 1,
        "rack_aware": {"strategy": "balance_subtopology"},
    },
}


def test_streams_units_match_rackplan_assign() -> None:
    traffic = {"clicks": [1.0, 2.0, 3.0, 4.0], "store-changelog": [10.0, 20.0, 30.0, 40.0]}
    rows = all_units(snapshot_doc(STREAMS, traffic))
    assert [r["assignor"] for r in rows] == [
        f"high-availability+{s}" for s in ("none", "min_traffic", "balance_subtopology")
    ]
    assert [r["registered"] for r in rows] == [False, False, True]
    assert [r["reference"] for r in rows] == [False, True, False]
    rack = {1: "az-a", 2: "az-b", 3: "az-c"}
    for row in rows:
        instance = json.loads(row["instance"])
        plan = assign_cli(instance)
        assert units.plan_digest(plan) == row["plan_sha256"]
        stats = plan["stats"]
        assert row["cross_nearest"] == stats["active_cross_rack"] + stats["standby_cross_rack"]
        # Bytes: actives read clicks and write the changelog, standbys read the changelog.
        expected = 0.0
        for pid, a in plan["streams_app"]["assignment"].items():
            r = {"p-1": "az-a", "p-2": "az-b"}[pid]
            for task in a["active"]:
                p = int(task.split("_")[1])
                expected += sum(
                    traffic[t][p] for t in traffic if rack[STREAMS["cluster"]["topics"][t][p][0]] != r
                )
            for task in a["standby"]:
                p = int(task.split("_")[1])
                expected += (
                    traffic["store-changelog"][p]
                    if rack[STREAMS["cluster"]["topics"]["store-changelog"][p][0]] != r
                    else 0.0
                )
        assert row["cross_bytes_nearest"] == pytest.approx(expected)
    assert rows[2]["moved"] == 0  # the registered configuration keeps the current tasks


@settings(max_examples=40, deadline=None)
@given(data=st.data(), assignor=st.sampled_from(["range", "cooperative-sticky", "rack-optimal"]))
def test_random_groups_match_rackplan_assign(data: st.DataObject, assignor: str) -> None:
    cluster = data.draw(clusters(max_topics=2, max_partitions=6))
    group = data.draw(consumer_groups(cluster, assignor, max_members=4))
    instance = instance_document(cluster, group)
    traffic = {t: [float(p + 1) for p in range(len(parts))] for t, parts in cluster.topics.items()}
    leaders = {t: [r[-1] for r in parts] for t, parts in cluster.topics.items()}
    for row in all_units(snapshot_doc(instance, traffic, leaders)):
        assert row["status"] == units.OK, row["detail"]
        unit_instance = json.loads(row["instance"])
        plan = assign_cli(unit_instance)
        assert units.plan_digest(plan) == row["plan_sha256"]
        settled = assign_cli(json.loads(row["settled_instance"])) if row["settled_instance"] else plan
        for key, value in recount(unit_instance, settled, traffic, leaders).items():
            assert row[key] == pytest.approx(value), key


def bytes_group(assignor: str = "rack-optimal") -> dict[str, Any]:
    inst: dict[str, Any] = json.loads(json.dumps(INSTANCE))
    inst["consumer_group"].update(assignor=assignor, objective="bytes")
    return inst


def test_a_bytes_group_gets_the_snapshots_traffic_and_other_assignors_drop_its_options() -> None:
    """A group registered with ``objective: bytes`` plans with ``cluster.traffic`` under rack-optimal; range
    and cooperative-sticky, which the contract refuses the option with, run without it (not ``invalid``)."""
    rows = {r["assignor"]: r for r in all_units(snapshot_doc(bytes_group(), TRAFFIC))}
    assert all(r["status"] == units.OK for r in rows.values()), [r["detail"] for r in rows.values()]
    optimal = json.loads(rows["rack-optimal"]["instance"])
    assert optimal["cluster"]["traffic"] == TRAFFIC and optimal["consumer_group"]["objective"] == "bytes"
    for name in ("range", "cooperative-sticky"):
        inst = json.loads(rows[name]["instance"])
        assert "traffic" not in inst["cluster"] and "objective" not in inst["consumer_group"]


def test_partially_known_traffic_is_left_out_of_the_instance() -> None:
    traffic = {"orders": [1e6, None, 3e6, 4e6, 5e6, 6e6]}
    (row,) = [r for r in all_units(snapshot_doc(bytes_group(), traffic)) if r["assignor"] == "rack-optimal"]
    assert row["status"] == units.OK and "traffic" not in json.loads(row["instance"])["cluster"]


def test_a_group_without_byte_options_is_planned_without_traffic() -> None:
    inst = json.loads(json.dumps(INSTANCE))
    inst["consumer_group"]["assignor"] = "rack-optimal"
    for row in all_units(snapshot_doc(inst, TRAFFIC)):
        assert "traffic" not in json.loads(row["instance"])["cluster"]


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_the_bytes_label_never_reads_more_cross_rack_bytes_than_rack_optimal(data: st.DataObject) -> None:
    """``rack-optimal+bytes`` is rack-optimal with ``objective: bytes``: over the assignments meeting the same
    balance rule, the fewest cross-rack bytes/s, so (when proven optimal) never more than the partition
    objective's plan, whose assignment meets that rule too; the units' figures are rackplan assign's."""
    cluster = data.draw(clusters(max_topics=2, max_partitions=6))
    group = data.draw(consumer_groups(cluster, "rack-optimal", max_members=4))
    instance = instance_document(cluster, group)
    weights = st.floats(min_value=0, max_value=1e6, allow_nan=False)
    traffic = {
        t: data.draw(st.lists(weights, min_size=len(p), max_size=len(p))) for t, p in cluster.topics.items()
    }
    leaders = {t: [r[-1] for r in parts] for t, parts in cluster.topics.items()}
    rows = {}
    for g in units.group_rows(snapshot_doc(instance, traffic, leaders)):
        labels = ("rack-optimal", BYTES_OPTIMAL)
        for u in units.unit_rows(g, parse_scenarios([]), consumer_assignors=labels):
            rows[u["assignor"]] = units.evaluate(u, 0.02, keep_plans=True)
    count, weighed = rows["rack-optimal"], rows[BYTES_OPTIMAL]
    assert count["status"] == weighed["status"] == units.OK, (count["detail"], weighed["detail"])
    unit_instance = json.loads(weighed["instance"])
    assert unit_instance["consumer_group"]["objective"] == "bytes"
    plan = assign_cli(unit_instance)
    assert units.plan_digest(plan) == weighed["plan_sha256"]
    for key, value in recount(unit_instance, plan, traffic, leaders).items():
        assert weighed[key] == pytest.approx(value), key
    if plan["stats"].get("optimal"):
        assert weighed["cross_bytes_nearest"] <= count["cross_bytes_nearest"] * (1 + 1e-9) + 1e-6


def test_the_fleets_dollars_are_the_agents() -> None:
    """The fleet's ``price_per_gb`` (0.02: both sides) and the agent's ``prices.cross_az_per_gb`` (0.01, charged
    each way) price the same cross-rack bytes alike: one month (730 h) and one GB for both."""
    from rackplan.agent.traffic.pricing import dollars_per_month

    rows = all_units(snapshot_doc(INSTANCE, TRAFFIC, {"orders": [2, 3, 1, 2, 3, 1]}))
    assert any(r["cross_bytes_leader"] > 0 for r in rows)
    for row in rows:
        assert row["cost_leader_usd_month"] == pytest.approx(
            dollars_per_month(row["cross_bytes_leader"], 0.01)
        )
