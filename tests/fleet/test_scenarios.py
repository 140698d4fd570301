"""Scenarios are pure, seeded functions of a snapshot slice (no Spark needed)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rackplan.agent.cluster.archive import ClusterState
from rackplan.fleet import scenarios as sc
from rackplan.fleet.scenarios import CONSUMER, STREAMS, NotApplicable, Unit, apply, parse_scenarios
from tests.strategies import clusters

RACK_OF = {1: "az-a", 2: "az-a", 3: "az-b", 4: "az-b", 5: "az-c", 6: "az-c"}


def state(topics: dict[str, list[list[int]]], leaders: dict[str, list[int]] | None = None) -> ClusterState:
    t = {name: tuple(tuple(r) for r in parts) for name, parts in topics.items()}
    lead = {name: tuple(r[0] if r else -1 for r in parts) for name, parts in t.items()}
    lead.update({k: tuple(v) for k, v in (leaders or {}).items()})
    return ClusterState(brokers=tuple(sorted(RACK_OF.items())), topics=t, leaders=lead, traffic={})


def group(racks: list[str | None]) -> dict[str, Any]:
    return {
        "group_id": "g",
        "members": [{"member_id": f"m-{i}", "rack": r, "topics": ["orders"]} for i, r in enumerate(racks)],
    }


def unit(st_: ClusterState, spec: dict[str, Any], kind: str = CONSUMER) -> Unit:
    return Unit("c1", kind, st_, spec)


def one(step: dict[str, Any]) -> sc.Scenario:
    return parse_scenarios([{"name": "s", **step}])[1]


ORDERS = {"orders": [[1, 3], [3, 5], [5, 1], [2, 4], [4, 6], [6, 2]]}


# ---- parsing ----------------------------------------------------------------------


def test_baseline_comes_first_and_shorthand_is_one_step() -> None:
    out = parse_scenarios(
        {
            "scenarios": [
                {"name": "a", "kind": "lose_rack", "rack": "az-a"},
                {"name": "b", "steps": [{"kind": "add_rack", "rack": "az-d"}, {"kind": "raise_rf", "topic": "*", "replication_factor": 3}]},
            ]
        }
    )  # fmt: skip
    assert [s.name for s in out] == ["baseline", "a", "b"]
    assert out[0].steps == ()
    assert isinstance(out[1].steps[0], sc.LoseRack)
    assert [type(s).__name__ for s in out[2].steps] == ["AddRack", "RaiseReplicationFactor"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([{"name": "baseline", "kind": "lose_rack", "rack": "x"}], "reserved"),
        (
            [
                {"name": "a", "kind": "lose_rack", "rack": "x"},
                {"name": "a", "kind": "lose_rack", "rack": "y"},
            ],
            "duplicate",
        ),
        ([{"name": "a", "kind": "explode"}], "kind"),
        ([{"name": "a", "kind": "shift_members", "fraction": 1.5, "to_rack": "az-a"}], "fraction"),
        ([{"name": "a", "kind": "lose_rack", "rack": "x", "typo": 1}], "typo"),
        ([{"name": "a", "kind": "add_rack", "rack": "z", "brokers": 1_000_000_000}], "brokers"),
    ],
)
def test_bad_scenarios_are_rejected_with_the_field(data: Any, message: str) -> None:
    with pytest.raises((ValueError, ValidationError), match=message):
        parse_scenarios(data)


def test_cluster_filter() -> None:
    s = parse_scenarios([{"name": "s", "clusters": "prod-*", "kind": "lose_rack", "rack": "az-a"}])[1]
    with pytest.raises(NotApplicable, match="does not apply"):
        apply(s, unit(state(ORDERS), group(["az-a"])))
    assert (
        apply(s, Unit("prod-1", CONSUMER, state(ORDERS), group(["az-a"]))).state.topics
        != state(ORDERS).topics
    )


# ---- lose a rack ------------------------------------------------------------------


def test_lose_rack_drops_replicas_moves_leaders_and_relocates_members() -> None:
    before = state(ORDERS, leaders={"orders": [1, 5, 1, 2, 4, 6]})
    after = apply(
        one({"kind": "lose_rack", "rack": "az-a"}), unit(before, group(["az-a", "az-b", "az-a", None]))
    )
    assert [b for b, _ in after.state.brokers] == [3, 4, 5, 6]
    assert after.state.topics["orders"] == ((3,), (3, 5), (5,), (4,), (4, 6), (6,))
    # A lost leader gives way to the first surviving replica; others keep theirs.
    assert after.state.leaders["orders"] == (3, 5, 5, 4, 4, 6)
    # Lost-rack members go round-robin to the surviving racks, in member-id order.
    assert [m["rack"] for m in after.spec["members"]] == ["az-b", "az-b", "az-c", None]


def test_lose_rack_member_policies_and_offline_partitions() -> None:
    st_ = state({"orders": [[1], [1, 2], [3]]})
    dropped = apply(
        one({"kind": "lose_rack", "rack": "az-a", "members": "drop"}), unit(st_, group(["az-a", "az-b"]))
    )
    assert [m["member_id"] for m in dropped.spec["members"]] == ["m-1"]
    assert sc.offline_partitions(dropped.state) == 2
    assert dropped.state.leaders["orders"] == (-1, -1, 3)
    kept = apply(one({"kind": "lose_rack", "rack": "az-a", "members": "keep"}), unit(st_, group(["az-a"])))
    assert kept.spec["members"][0]["rack"] == "az-a"
    with pytest.raises(NotApplicable, match="every member"):
        apply(one({"kind": "lose_rack", "rack": "az-a", "members": "drop"}), unit(st_, group(["az-a"])))
    with pytest.raises(NotApplicable, match="no broker"):
        apply(one({"kind": "lose_rack", "rack": "az-x"}), unit(st_, group(["az-a"])))


def test_lose_rack_relocates_streams_clients() -> None:
    app = {"application_id": "a", "subtopologies": [], "clients": [{"process_id": "p", "rack": "az-c"}]}
    after = apply(one({"kind": "lose_rack", "rack": "az-c"}), unit(state(ORDERS), app, STREAMS))
    assert after.spec["clients"][0]["rack"] == "az-a"


# ---- add a rack, move replicas, raise the replication factor ---------------------------


def test_add_rack_moves_its_fair_share_of_replicas() -> None:
    topics = {"orders": [[1, 3], [3, 5], [5, 1], [2, 4], [4, 6], [6, 2], [1, 4], [3, 6]]}
    after = apply(one({"kind": "add_rack", "rack": "az-d", "seed": 1}), unit(state(topics), group(["az-a"])))
    new = [b for b, r in after.state.brokers if r == "az-d"]
    assert new == [7, 8]  # the average number of brokers per rack, new ids
    changed = [
        (old, cur)
        for old, cur in zip(topics["orders"], after.state.topics["orders"], strict=True)
        if list(cur) != old
    ]
    assert len(changed) == 2  # round(8 / 4)
    for old, cur in changed:
        assert len(cur) == len(old) and len(set(cur)) == len(cur)
        assert sum(1 for b in cur if b in new) == 1 and cur[0] == old[0]  # the leader stays
    with pytest.raises(NotApplicable, match="already exists"):
        apply(one({"kind": "add_rack", "rack": "az-a"}), unit(state(topics), group(["az-a"])))


def test_add_rack_moves_a_non_leader_replica_whatever_the_replica_order() -> None:
    """Leaders that are not the first replica (moved leadership) stay put too (issue 15)."""
    topics = {"orders": [[1, 3], [3, 5], [5, 1], [2, 4], [4, 6], [6, 2], [1, 4], [3, 6], [2]]}
    leaders = {"orders": [3, 5, 1, 4, 6, 2, 4, 6, 2]}  # every leader the last replica
    before = state(topics, leaders=leaders)
    for seed in range(8):
        step = {"kind": "add_rack", "rack": "az-d", "seed": seed, "reassign_fraction": 1.0}
        after = apply(one(step), unit(before, group(["az-a"])))
        new = {b for b, r in after.state.brokers if r == "az-d"}
        for p, (old, cur) in enumerate(zip(topics["orders"], after.state.topics["orders"], strict=True)):
            assert sum(1 for b in cur if b in new) == 1  # every partition moved one replica
            if len(old) > 1:
                assert after.state.leaders["orders"][p] == leaders["orders"][p] in cur
            else:  # its only replica was the leader: leadership follows it
                assert after.state.leaders["orders"][p] == cur[0] in new


def test_move_replicas_moves_one_replica_of_n_partitions_to_the_rack() -> None:
    st_ = state(ORDERS, leaders={"orders": [1, 3, 5, 2, 4, 6]})
    after = apply(
        one(
            {
                "kind": "move_replicas",
                "topic": "ord*",
                "count": 2,
                "to_rack": "az-c",
                "from_rack": "az-a",
                "seed": 3,
            }
        ),
        unit(st_, group(["az-a"])),
    )
    diffs = []
    for p, (old, cur) in enumerate(zip(st_.topics["orders"], after.state.topics["orders"], strict=True)):
        moved = [(a, b) for a, b in zip(old, cur, strict=True) if a != b]
        if moved:
            diffs.append(p)
            assert len(moved) == 1
            (a, b) = moved[0]
            assert RACK_OF[a] == "az-a" and RACK_OF[b] == "az-c" and b not in old
            if st_.leaders["orders"][p] == a:
                assert after.state.leaders["orders"][p] == b
    assert len(diffs) == 2
    # Partitions with an az-a replica and a free az-c broker: 0 (1,3) and 3 (2,4); 2 (5,1) and 5 (6,2) already hold one of them.
    assert set(diffs) <= {0, 2, 3, 5}


def test_move_replicas_counts_are_capped_by_candidates() -> None:
    st_ = state({"orders": [[1], [3]]})
    after = apply(one({"kind": "move_replicas", "topic": "orders", "count": 10}), unit(st_, group(["az-a"])))
    assert all(
        RACK_OF[a[0]] != RACK_OF[b[0]]
        for a, b in zip(st_.topics["orders"], after.state.topics["orders"], strict=True)
    )
    with pytest.raises(NotApplicable):
        apply(
            one({"kind": "move_replicas", "topic": "orders", "count": 1, "to_rack": "az-q"}),
            unit(st_, group([])),
        )


def test_raise_rf_spreads_new_replicas_over_racks() -> None:
    st_ = state({"orders": [[1], [3, 4], [5, 1, 3]]})
    after = apply(
        one({"kind": "raise_rf", "topic": "*", "replication_factor": 3, "seed": 2}),
        unit(st_, group(["az-a"])),
    )
    parts = after.state.topics["orders"]
    assert [len(r) for r in parts] == [3, 3, 3]
    assert [r[: len(o)] for r, o in zip(parts, st_.topics["orders"], strict=True)] == list(
        st_.topics["orders"]
    )
    assert sorted(RACK_OF[b] for b in parts[0]) == ["az-a", "az-b", "az-c"]  # one replica per rack
    assert RACK_OF[parts[1][2]] in {"az-a", "az-c"}  # a rack without a replica of it, not az-b again
    assert parts[2] == (5, 1, 3)
    assert after.state.leaders == st_.leaders
    capped = apply(one({"kind": "raise_rf", "topic": "*", "replication_factor": 9}), unit(st_, group([])))
    assert all(len(r) == 6 for r in capped.state.topics["orders"])


# ---- shift members ----------------------------------------------------------------------


def test_shift_members_moves_the_fraction_of_eligible_members() -> None:
    spec = group(["az-a", "az-a", "az-b", "az-b", "az-c", None])
    after = apply(
        one({"kind": "shift_members", "fraction": 0.5, "to_rack": "az-c", "seed": 9}),
        unit(state(ORDERS), spec),
    )
    moved = [m for m, o in zip(after.spec["members"], spec["members"], strict=True) if m["rack"] != o["rack"]]
    assert len(moved) == 3  # half of the 5 members not in az-c, rounded half up
    assert all(m["rack"] == "az-c" for m in moved)
    assert after.spec["members"][4]["rack"] == "az-c"  # already there: not counted, not moved


def test_shift_members_respects_from_rack_and_group_pattern() -> None:
    spec = group(["az-a", "az-a", "az-b", "az-b"])
    step = {"kind": "shift_members", "fraction": 1.0, "to_rack": "az-c", "from_rack": "az-a"}
    after = apply(one(step), unit(state(ORDERS), spec))
    assert [m["rack"] for m in after.spec["members"]] == ["az-c", "az-c", "az-b", "az-b"]
    untouched = apply(one({**step, "groups": "other-*"}), unit(state(ORDERS), spec))
    assert untouched.spec == spec


# ---- determinism and locality (what the Spark job relies on) -----------------------------

STEPS = [
    {"kind": "lose_rack", "rack": "az-a"},
    {"kind": "add_rack", "rack": "az-q", "reassign_fraction": 0.5},
    {"kind": "move_replicas", "topic": "*", "count": 2},
    {"kind": "move_replicas", "topic": "t*", "count": 1, "to_rack": "az-b"},
    {"kind": "raise_rf", "topic": "*", "replication_factor": 3},
    {"kind": "shift_members", "fraction": 0.5, "to_rack": "az-b"},
]


def _state_of(cluster: Any) -> ClusterState:
    return ClusterState(
        brokers=tuple(sorted(cluster.broker_racks.items())),
        topics=dict(cluster.topics),
        leaders={t: tuple(r[0] for r in parts) for t, parts in cluster.topics.items()},
        traffic={},
    )


@settings(max_examples=60, deadline=None)
@given(
    cluster=clusters(max_racks=3, max_brokers=6, max_topics=3),
    step=st.sampled_from(STEPS),
    seed=st.integers(0, 3),
)
def test_a_scenario_on_a_slice_is_the_slice_of_the_scenario(
    cluster: Any, step: dict[str, Any], seed: int
) -> None:
    """Applying to one group's topics equals applying to the whole snapshot, then slicing; and it is deterministic."""
    scenario = one({**step, "seed": seed} if step["kind"] != "lose_rack" else step)
    full = _state_of(cluster)
    topics = sorted(full.topics)[:1]
    spec = group(["az-a", "az-b", None, "az-c"])
    try:
        whole = apply(scenario, unit(full, spec))
    except NotApplicable:
        with pytest.raises(NotApplicable):
            apply(scenario, unit(full.restrict(topics), spec))
        return
    part = apply(scenario, unit(full.restrict(topics), spec))
    assert part.state == whole.state.restrict(topics)
    assert part.spec == whole.spec
    assert apply(scenario, unit(full, spec)) == whole  # the same seed, the same what-if
    # Replica lists stay duplicate-free and name known brokers.
    known = {b for b, _ in whole.state.brokers}
    for parts in whole.state.topics.values():
        for r in parts:
            assert len(set(r)) == len(r) and set(r) <= known
