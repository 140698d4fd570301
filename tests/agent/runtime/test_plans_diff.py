"""``rackplan plans diff``: the plan against the live group, members matched by the agent's own rule."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.agent.cluster.metadata import Snapshot, TopicState
from rackplan.agent.groups.membership import RealGroup, RealMember
from rackplan.agent.runtime.plans_diff import plan_diff

RACKS: dict[int, str | None] = {1: "az-a", 2: "az-b"}
SNAP = Snapshot(brokers=dict(RACKS), topics={"t": TopicState(((1,), (1,), (2,), (2,)), (1, 1, 2, 2))})


def member(mid: str, parts: list[int], instance: str | None = None, client: str = "c") -> RealMember:
    return RealMember(mid, client, "10.0.0.1", instance, tuple(("t", p) for p in sorted(parts)))


def test_a_group_on_its_plan_is_in_step() -> None:
    planned = {"a": [["t", 0], ["t", 1]], "b": [["t", 2], ["t", 3]]}
    # Kafka's member ids are its own; static members carry the plan's id as group.instance.id
    real = RealGroup("g", "STABLE", (member("k-1", [0, 1], "a"), member("k-2", [2, 3], "b")))
    d = plan_diff(
        planned,
        real,
        {"a": "az-a", "b": "az-b"},
        {"k-1": "az-a", "k-2": "az-b"},
        SNAP,
        RACKS,
        "nearest-replica",
    )
    assert d.in_step and d.as_json()["members_differ"] == []
    assert d.as_json()["cross_rack"]["planned"] == d.as_json()["cross_rack"]["live"] == 0


def test_differences_are_named_member_by_member_and_partition_by_partition() -> None:
    planned = {"a": [["t", 0], ["t", 1]], "b": [["t", 2]], "gone": [["t", 3]]}
    real = RealGroup(
        "g",
        "STABLE",
        (
            member("k-1", [0, 2], "a"),  # holds b's t-2, lacks its t-1
            member("b", [2]),  # matched by member id: t-2 held twice
            member("k-9", [5], client="stranger"),  # not in the plan; t-5 planned for nobody
        ),
    )
    live_racks = {"k-1": "az-a", "b": "az-a", "k-9": "az-b"}
    d = plan_diff(planned, real, {"a": "az-a", "b": "az-a"}, live_racks, SNAP, RACKS, "nearest-replica")
    doc = d.as_json()
    assert not d.in_step
    assert doc["members_differ"] == ["a", "gone", "k-9"]
    by = {m["member"] or m["live_member"]: m for m in doc["members"]}
    assert (
        by["a"]["missing"] == [["t", 1]]
        and by["a"]["extra"] == [["t", 2]]
        and by["a"]["live_member"] == "k-1"
    )
    assert by["gone"]["live_member"] is None and by["gone"]["missing"] == [["t", 3]]
    assert by["b"]["same"]
    assert doc["unowned"] == [["t", 1], ["t", 3]]
    assert doc["wrong_member"] == []  # t-2 is held by its planned member b (and by a too)
    assert doc["owned_twice"] == [{"topic": "t", "partition": 2, "held_by": ["a", "b"]}]
    assert doc["unplanned"] == [{"topic": "t", "partition": 5, "held_by": ["k-9"]}]
    # planned: b (az-a) reads t-2 (az-b) cross-rack; live: a reads t-2 too, b as planned; t-5 is not in the metadata
    assert doc["cross_rack"]["planned"] == 1 and doc["cross_rack"]["live"] == 2


def test_an_empty_group_owns_nothing() -> None:
    d = plan_diff({"a": [["t", 0]]}, RealGroup("g", "EMPTY", ()), {}, {}, SNAP, RACKS, "nearest-replica")
    assert d.as_json()["unowned"] == [["t", 0]] and d.notes == (
        "the group has no live members (state EMPTY)",
    )


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.integers(0, 5), st.sampled_from(["a", "b", "c"]), max_size=6),
    st.dictionaries(
        st.integers(0, 5), st.lists(st.sampled_from(["a", "b", "d"]), max_size=2, unique=True), max_size=6
    ),
)
def test_every_partition_lands_in_exactly_the_sections_its_owners_say(
    plan_owner: dict[int, str], live_owners: dict[int, list[str]]
) -> None:
    planned: dict[str, list[list[Any]]] = {}
    for p, m in plan_owner.items():
        planned.setdefault(m, []).append(["t", p])
    held: dict[str, list[int]] = {}
    for p, ms in live_owners.items():
        for m in ms:
            held.setdefault(m, []).append(p)
    real = RealGroup(
        "g", "STABLE", tuple(member(m, ps, client=f"client-{m}") for m, ps in sorted(held.items()))
    )
    doc = plan_diff(planned, real, {}, {}, SNAP, RACKS, "nearest-replica").as_json()
    holders = {p: ms for p, ms in live_owners.items() if ms}
    assert {p for _, p in doc["unowned"]} == {p for p in plan_owner if p not in holders}
    assert {w["partition"] for w in doc["wrong_member"]} == {
        p for p, m in plan_owner.items() if p in holders and m not in holders[p]
    }
    assert {w["partition"] for w in doc["owned_twice"]} == {p for p, ms in holders.items() if len(ms) > 1}
    assert {w["partition"] for w in doc["unplanned"]} == {p for p in holders if p not in plan_owner}
    in_step = all(holders.get(p) == [m] for p, m in plan_owner.items()) and set(holders) <= set(plan_owner)
    assert doc["in_step"] == (in_step and set(held) <= set(planned))
