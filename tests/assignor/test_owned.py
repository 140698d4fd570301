"""Previous-owner rules of the consumer protocol, shared by the sticky-aware assignors."""

from __future__ import annotations

from rackplan.assignor.consumer.owned import count_moved, previous_owners, withhold_moving
from rackplan.assignor.model import Cluster, ConsumerGroup, ConsumerPlan, Member

CLUSTER = Cluster(broker_racks={1: "a", 2: "b"}, topics={"t": ((1,), (2,), (1,)), "u": ((2,),)})


def group(*members: Member) -> ConsumerGroup:
    return ConsumerGroup("g", "cooperative-sticky", members)


def test_older_generation_claims_are_dropped() -> None:
    g = group(
        Member("m1", "a", ("t",), owned=(("t", 0), ("t", 1)), generation=4),
        Member("m2", "b", ("t",), owned=(("t", 1), ("t", 2)), generation=3),
    )
    assert previous_owners(CLUSTER, g) == {("t", 0): "m1", ("t", 1): "m1"}


def test_same_generation_double_claim_has_no_owner() -> None:
    g = group(
        Member("m1", "a", ("t",), owned=(("t", 0), ("t", 1)), generation=2),
        Member("m2", "b", ("t",), owned=(("t", 1),), generation=2),
    )
    assert previous_owners(CLUSTER, g) == {("t", 0): "m1"}


def test_claims_without_generation_are_believed_and_vanished_partitions_ignored() -> None:
    g = group(
        Member("m1", "a", ("t",), owned=(("t", 0), ("t", 9), ("gone", 0))),
        Member("m2", "b", ("u",), owned=(("t", 1),)),
    )
    # m2 no longer subscribes to t but still holds t-1 until it revokes it.
    assert previous_owners(CLUSTER, g) == {("t", 0): "m1", ("t", 1): "m2"}


def test_withhold_moving_lists_revocations_for_old_owner() -> None:
    owners = {("t", 0): "m1", ("t", 1): "m2"}
    plan = withhold_moving({"m1": [("t", 1), ("t", 0)], "m2": [("t", 2)]}, owners)
    assert plan.assignment == {"m1": [("t", 0)], "m2": [("t", 2)]}
    assert plan.revoked == {"m2": [("t", 1)]}


def test_count_moved_counts_withheld_and_reassigned_only_for_subscribed() -> None:
    owners = {("t", 0): "m1", ("t", 1): "m2", ("t", 2): "m1", ("u", 0): "m2"}
    plan = ConsumerPlan(assignment={"m1": [("t", 0), ("t", 1)], "m2": []}, revoked={"m2": [("t", 1)]})
    subscribed = {("t", 0), ("t", 1), ("t", 2)}
    # t-1 went from m2 to m1, t-2 is no longer with m1; u-0 is not subscribed any more.
    assert count_moved(plan, owners, subscribed) == 2


def test_contested_partition_is_withheld_from_everyone_and_revoked_by_every_claimer() -> None:
    from rackplan.assignor.consumer.owned import contested_partitions
    from rackplan.assignor.consumer.sticky import assign

    g = group(
        Member("m1", "a", ("t",), owned=(("t", 0), ("t", 1)), generation=2),
        Member("m2", "b", ("t",), owned=(("t", 1), ("t", 2)), generation=2),
    )
    assert contested_partitions(CLUSTER, g) == {("t", 1): ["m1", "m2"]}
    plan = assign(CLUSTER, g)
    assert all(("t", 1) not in parts for parts in plan.assignment.values())
    assert ("t", 1) in plan.revoked["m1"]
    assert ("t", 1) in plan.revoked["m2"]
    # Follow-up round: each owns what it was given; t-1 is handed out, nothing withheld.
    follow = group(
        *(
            Member(m, r, ("t",), owned=tuple(plan.assignment[m]), generation=3)
            for m, r in (("m1", "a"), ("m2", "b"))
        )
    )
    again = assign(CLUSTER, follow)
    assert again.revoked == {}
    assert sorted(tp for parts in again.assignment.values() for tp in parts) == [("t", 0), ("t", 1), ("t", 2)]
