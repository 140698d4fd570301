"""``rackplan plans explain``: each partition's verdict and reason; the counts agree with the agent's own judge
(:class:`LocalityJudge`) and the unfixable ones with ``best_locality``, the floor no assignment beats."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.agent.cluster.metadata import NO_LEADER, Snapshot, TopicState
from rackplan.agent.planning.fixable import best_locality
from rackplan.agent.planning.planner import LocalityJudge, cluster_for, make_registration
from rackplan.agent.protocol.plans import Locality, PlanRecord
from rackplan.agent.runtime.plans_explain import (
    CROSS_RACK,
    LEADER_ELSEWHERE,
    MEMBER_RACK_UNKNOWN,
    MISSING,
    NO_REPLICA_IN_RACK,
    PARTITION_RACK_UNKNOWN,
    explain,
)

RACKS: dict[int, str | None] = {1: "az-a", 2: "az-b", 3: "az-c", 4: None}


def snapshot(replicas: list[list[int]], leaders: list[int] | None = None) -> Snapshot:
    lead = leaders if leaders is not None else [r[0] if r else NO_LEADER for r in replicas]
    state = TopicState(tuple(tuple(r) for r in replicas), tuple(lead))
    return Snapshot(brokers=dict(RACKS), topics={"t": state})


def test_each_partition_gets_its_verdict_and_reason() -> None:
    snap = snapshot([[1, 2], [2], [4], [3]])  # t-0: a, b; t-1: b; t-2: no rack; t-3: c
    assignment = {"m-a": [["t", 0], ["t", 1]], "m-b": [["t", 2]], "m-x": [["t", 3]], "m-a2": [["t", 9]]}
    found = explain(
        assignment, {"m-a": "az-a", "m-b": "az-b", "m-a2": "az-a"}, snap, RACKS, "nearest-replica"
    )
    by = {(v.topic, v.partition): v for v in found.verdicts}
    assert by[("t", 0)].verdict == "local"
    assert (by[("t", 1)].verdict, by[("t", 1)].why, by[("t", 1)].replica_racks) == (
        CROSS_RACK,
        NO_REPLICA_IN_RACK,
        ("az-b",),
    )
    assert by[("t", 2)].verdict == PARTITION_RACK_UNKNOWN
    assert by[("t", 3)].verdict == MEMBER_RACK_UNKNOWN  # m-x: no registration places it
    assert by[("t", 9)].verdict == MISSING
    # t-3 is in az-c only, and no member is in az-c: no assignment reads it locally
    assert [(v.topic, v.partition) for v in found.unfixable] == [("t", 3)]
    doc = found.as_json()
    assert doc["counts"] == {
        "partitions": 5,
        "local": 1,
        "cross_rack": 1,
        "member_rack_unknown": 1,
        "partition_rack_unknown": 1,
        "missing": 1,
        "unfixable": 1,
    }
    assert doc["member_racks"] == ["az-a", "az-b"]


def test_leader_fetching_judges_the_leader_rack() -> None:
    snap = snapshot([[1, 2], [1, 2]], leaders=[2, NO_LEADER])
    found = explain({"m": [["t", 0], ["t", 1]]}, {"m": "az-a"}, snap, RACKS, "leader")
    assert [(v.verdict, v.why) for v in found.verdicts] == [
        (CROSS_RACK, LEADER_ELSEWHERE),
        (PARTITION_RACK_UNKNOWN, ""),
    ]


def plan_of(assignment: dict[str, list[list[Any]]]) -> PlanRecord:
    doc = {"consumer_group": {"group_id": "g", "assignment": assignment, "revoked": {}}, "stats": {}}
    return PlanRecord("consumer/g", 1, "", "", "", "", doc, 0, "nearest-replica", None, Locality(0, 0))


@st.composite
def cases(
    draw: st.DrawFn,
) -> tuple[list[list[int]], list[int], dict[str, list[list[Any]]], dict[str, str | None]]:
    replicas = draw(
        st.lists(st.lists(st.sampled_from([1, 2, 3, 4]), max_size=3, unique=True), min_size=1, max_size=8)
    )
    leaders = [draw(st.sampled_from([*r, NO_LEADER])) if r else NO_LEADER for r in replicas]
    members = [f"m-{i}" for i in range(draw(st.integers(1, 4)))]
    member_racks = {m: draw(st.sampled_from(["az-a", "az-b", "az-c", "az-d"])) for m in members}
    assignment: dict[str, list[list[Any]]] = {m: [] for m in members}
    for p in range(len(replicas) + 1):  # one partition past the end: not in the metadata
        assignment[draw(st.sampled_from(members))].append(["t", p])
    return replicas, leaders, assignment, dict(member_racks)


@settings(max_examples=300, deadline=None)
@given(cases(), st.sampled_from(["nearest-replica", "leader"]), st.data())
def test_counts_agree_with_the_agents_judge_and_unfixable_with_best_locality(
    case: tuple[list[list[int]], list[int], dict[str, list[list[Any]]], dict[str, str | None]],
    mode: str,
    data: st.DataObject,
) -> None:
    replicas, leaders, assignment, member_racks = case
    snap = snapshot(replicas, leaders)
    known = {m: r for m, r in member_racks.items() if data.draw(st.booleans(), label=f"{m} registered")}
    found = explain(assignment, known, snap, RACKS, mode)
    judge = LocalityJudge(cluster_for(snap, RACKS, ["t"]), snap, RACKS, mode)
    pairs = [(known.get(m), t, p) for m in sorted(assignment) for t, p in assignment[m]]
    truth = judge.count(pairs)
    c = found.counts()
    assert c[CROSS_RACK] == truth.cross_rack
    assert c["partitions"] - c[MISSING] == truth.total
    members = [{"member_id": m, "rack": r, "topics": ["t"]} for m, r in member_racks.items()]
    reg = make_registration("consumer", {"group_id": "g", "members": members}, mode, "file")
    everyone = explain(assignment, member_racks, snap, RACKS, mode)
    assert len(everyone.unfixable) == best_locality(snap, RACKS, reg, plan_of(assignment)).cross_rack
