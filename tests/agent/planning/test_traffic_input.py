"""Which plans get measured traffic (groups that weigh bytes only), and the bytes figures of an assignment."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.agent.cluster.metadata import Snapshot, TopicState
from rackplan.agent.planning.planner import plan_for, registrations
from rackplan.agent.planning.traffic_figures import plan_bytes
from rackplan.agent.planning.traffic_input import wants_traffic
from rackplan.agent.settings.sections import Settings

RACKS: dict[int, str | None] = {1: "a", 2: "b", 3: "c"}
#: t-0..t-2 in rack a, t-3 in rack b
SNAP = Snapshot(brokers=dict(RACKS), topics={"t": TopicState(((1,), (1,), (1,), (2,)), (1, 1, 1, 2))})
HOT = {"t": (5.0, 1000.0, 7.0, 3.0)}


def reg(**group: Any) -> Any:
    g = {
        "group_id": "g",
        "assignor": "rack-optimal",
        "members": [
            {"member_id": "ma", "rack": "a", "topics": ["t"]},
            {"member_id": "mb", "rack": "b", "topics": ["t"]},
        ],
        **group,
    }
    (r,) = registrations(Settings.model_validate({"consumer_groups": [g]}))
    return r


def without_time(doc: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "stats": {k: v for k, v in doc["stats"].items() if k != "elapsed_ms"}}


def test_who_wants_traffic() -> None:
    assert wants_traffic("consumer", {"objective": "bytes"}) and wants_traffic(
        "consumer", {"balance": "bytes"}
    )
    assert not wants_traffic("consumer", {"objective": "partitions", "balance": "count"})
    assert wants_traffic("streams", {"rack_aware": {"weigh_by_traffic": True}})
    assert not wants_traffic("streams", {"rack_aware": {"strategy": "min_traffic"}})


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky", "rack-optimal"])
def test_a_group_counting_partitions_is_planned_as_without_traffic(assignor: str) -> None:
    r = reg(assignor=assignor)
    with_hot = plan_for(SNAP, RACKS, r, None, traffic=HOT).document
    assert without_time(with_hot) == without_time(plan_for(SNAP, RACKS, r, None).document)
    assert "cross_rack_bytes_per_s" not in with_hot["stats"]


def test_a_bytes_group_sends_the_lightest_partition_across() -> None:
    r = reg(objective="bytes")
    doc = plan_for(SNAP, RACKS, r, None, traffic=HOT).document
    assert sorted(map(tuple, doc["consumer_group"]["assignment"]["mb"])) == [("t", 0), ("t", 3)]
    assert doc["stats"]["cross_rack_bytes_per_s"] == 5.0
    assert plan_bytes(SNAP, RACKS, r, doc["consumer_group"]["assignment"], HOT).cross_rack_bytes_per_s == 5.0
    # a bytes group none of whose topics is measured: planned as without traffic
    unmeasured = plan_for(SNAP, RACKS, r, None, traffic={"other": (1.0,)}).document
    assert without_time(unmeasured) == without_time(plan_for(SNAP, RACKS, r, None).document)


@settings(max_examples=60, deadline=None)
@given(
    owners=st.lists(st.sampled_from(["ma", "mb", "mc"]), min_size=4, max_size=4),
    rates=st.lists(st.floats(0, 1e6), min_size=3, max_size=4),
)
def test_plan_bytes_against_a_direct_count(owners: list[str], rates: list[float]) -> None:
    """Members in a, b and c (c holds no replica); a topic of 3 measured partitions leaves one unknown."""
    r = reg(members=[{"member_id": m, "rack": m[1], "topics": ["t"]} for m in ("ma", "mb", "mc")])
    assignment: dict[str, list[list[Any]]] = {m: [] for m in ("ma", "mb", "mc")}
    for p, m in enumerate(owners):
        assignment[m].append(["t", p])
    traffic = {"t": tuple(rates)}
    got = plan_bytes(SNAP, RACKS, r, assignment, traffic)
    home = ["a", "a", "a", "b"]
    known = [p for p in range(4) if p < len(rates)]
    assert got.unknown == 4 - len(known)
    assert got.bytes_per_s == pytest.approx(sum(rates[p] for p in known))
    crossing = [p for p in known if owners[p][1] != home[p]]
    assert got.cross_rack_bytes_per_s == pytest.approx(sum(rates[p] for p in crossing))


def _streams(weigh: bool) -> tuple[Snapshot, Any, dict[str, tuple[float, ...]]]:
    import json
    from pathlib import Path

    path = (
        Path(__file__).resolve().parents[4]
        / "shared"
        / "samples"
        / "sample-streams-T100-N10-tags-min_traffic.json"
    )
    if not path.exists():
        pytest.skip(f"{path} is not here (the shared samples, as tests/test_cli.py reads them)")
    inst = json.loads(path.read_text())
    brokers = {b["id"]: b["rack"] for b in inst["cluster"]["brokers"]}
    topics = {
        t: TopicState(tuple(map(tuple, reps)), tuple(r[0] for r in reps))
        for t, reps in inst["cluster"]["topics"].items()
    }
    app = inst["streams_app"]
    app["rack_aware"]["weigh_by_traffic"] = weigh
    (r,) = registrations(Settings.model_validate({"streams_apps": [app]}))
    traffic = {
        t: tuple(float(1000 * (p % 7 == 0)) for p in range(len(st.replicas))) for t, st in topics.items()
    }
    return Snapshot(brokers=brokers, topics=topics), r, traffic


def test_a_streams_app_weighing_traffic_gets_it_and_one_that_does_not_is_planned_as_without() -> None:
    snap, r, traffic = _streams(True)
    racks = dict(snap.brokers)
    doc = plan_for(snap, racks, r, None, traffic=traffic).document
    assert "active_cross_rack_bytes_per_s" in doc["stats"]
    snap, r, traffic = _streams(False)
    plain = plan_for(snap, racks, r, None, traffic=traffic).document
    assert without_time(plain) == without_time(plan_for(snap, racks, r, None).document)
    assert "active_cross_rack_bytes_per_s" not in plain["stats"]
