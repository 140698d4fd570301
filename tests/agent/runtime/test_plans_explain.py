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
    explain_streams,
)
from rackplan.assignor.model import Cluster, StreamsApp, Subtopology
from rackplan.assignor.streams import plan_document
from tests.streams_strategies import streams_instances

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


def test_a_registered_member_the_plan_does_not_name_is_a_rack_of_the_group() -> None:
    """The plan gave everything to m-a (az-a); m-b (az-b) registered since: t-1 is fixable, t-2 is not."""
    snap = snapshot([[1], [2], [3]])
    found = explain(
        {"m-a": [["t", 0], ["t", 1], ["t", 2]]}, {"m-a": "az-a", "m-b": "az-b"}, snap, RACKS, "leader"
    )
    assert found.member_racks == ("az-a", "az-b")
    assert [(v.topic, v.partition) for v in found.unfixable] == [("t", 2)]
    assert found.count(CROSS_RACK) == 2


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
    # a member given nothing may be absent from the plan (registered after it was made): still the group's
    unnamed = [m for m in members if not assignment[m] and draw(st.booleans(), label=f"{m} not in the plan")]
    for m in unnamed:
        del assignment[m]
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


# ---- Streams apps ------------------------------------------------------------------


def streams_snapshot(cluster: Cluster) -> Snapshot:
    """The metadata a cluster model stands for: its brokers' racks, and each partition led by its first replica."""
    topics = {
        t: TopicState(reps, tuple(r[0] if r else NO_LEADER for r in reps))
        for t, reps in cluster.topics.items()
    }
    return Snapshot(brokers=dict(cluster.broker_racks), topics=topics)


@settings(max_examples=200, deadline=None)
@given(streams_instances())
def test_a_streams_plans_cross_rack_pairs_per_role_are_its_statistics(
    inst: tuple[Cluster, StreamsApp],
) -> None:
    """Each role's cross-rack (task, topic partition) pairs are the plan's own ``active_cross_rack`` and
    ``standby_cross_rack`` (the assignor's task model counts them its own way), and every pair of the plan
    is judged: an active's sources and, stateful, its changelogs; a standby's or warm-up's changelogs."""
    cluster, app = inst
    doc = plan_document(cluster, app)
    assignment = doc["streams_app"]["assignment"]
    subs = {s.id: s for s in app.subtopologies}
    found = explain_streams(
        assignment,
        subs,
        {c.process_id: c.rack for c in app.clients},
        streams_snapshot(cluster),
        dict(cluster.broker_racks),
        "nearest-replica",
    )
    roles = found.by_role()
    assert roles.get("active", {}).get(CROSS_RACK, 0) == doc["stats"]["active_cross_rack"]
    assert roles.get("standby", {}).get(CROSS_RACK, 0) == doc["stats"]["standby_cross_rack"]
    assert found.count(CROSS_RACK) == sum(r[CROSS_RACK] for r in roles.values())
    for role in ("active", "standby", "warmup"):
        tasks = [t for a in assignment.values() for t in a[role]]
        expected = 0
        for task in tasks:
            sub = subs[task.split("_")[0]]
            names = ([*sub.source_topics] if role == "active" else []) + (
                [*sub.changelog_topics] if sub.stateful else []
            )
            expected += sum(1 for t in names if t in cluster.topics)
        assert roles.get(role, {}).get("pairs", 0) == expected, role
    assert found.count(MISSING) == 0
    clients = {c.process_id for c in app.clients}
    assert all(v.member in clients and v.role and v.task for v in found.verdicts)


def test_a_streams_explanation_names_task_and_role_and_renders_them() -> None:
    """A stateful task whose active reads ``in`` from az-a and whose standby follows the changelog in az-b."""
    from rackplan.agent.runtime.plans_text import render_explain

    snap = Snapshot(
        brokers=dict(RACKS),
        topics={"in": TopicState(((1,), (2,)), (1, 2)), "log": TopicState(((2,), (2,)), (2, 2))},
    )
    subs = {"0": Subtopology("0", ("in",), ("log",), True)}
    plan = {
        "p-a": {"active": ["0_0", "0_1"], "standby": [], "warmup": []},
        "p-b": {"active": [], "standby": ["0_0", "0_1"], "warmup": []},
    }
    found = explain_streams(plan, subs, {"p-a": "az-a", "p-b": "az-b"}, snap, RACKS, "nearest-replica")
    doc = found.as_json()
    # p-a: in-0 local, log-0 cross (the active writes its changelog), in-1 cross, log-1 cross; p-b: log local
    assert doc["counts"]["by_role"] == {
        "active": {"pairs": 4, CROSS_RACK: 3},
        "standby": {"pairs": 2, CROSS_RACK: 0},
    }
    assert [(v["task"], v["role"], v["topic"], v["partition"]) for v in doc["cross_rack"]] == [
        ("0_0", "active", "log", 0),
        ("0_1", "active", "in", 1),
        ("0_1", "active", "log", 1),
    ]
    text = render_explain({"key": "streams/app", "generation": 3, **doc, "notes": []})
    assert "6 (task, partition) pairs: 3 local, 3 cross-rack" in text
    assert "cross-rack by role: active 3 of 4, standby 0 of 2" in text
    assert "cross-rack in-1 (active 0_1): client p-a in az-a, replicas in az-b" in text
