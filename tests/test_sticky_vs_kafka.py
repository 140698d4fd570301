"""cooperative-sticky against a model of Kafka's rack-aware CooperativeStickyAssignor (equal subscriptions).

The model (:mod:`tests.test_sticky_kafka_model`) is a plain transcription of Kafka's
constrained algorithm; both assignors run the same two cooperative rounds
(this round withholds partitions that change owner, the follow-up round hands
them out), and we compare total partitions moved and cross-rack partitions
after the follow-up round.  Kafka visits members in hash-map order, so the
model runs with several member orders.

What the module docstring of :mod:`assignor.sticky_assignor` proves, and what
is checked here: never more cross-rack partitions than Kafka; never more moves
unless strictly fewer cross-rack partitions.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assignor.consumer import cross_rack_count, subscribed_partitions
from assignor.model import Cluster, ConsumerGroup, ConsumerPlan, Member
from assignor.owned import count_moved, previous_owners, withhold_moving
from assignor.sticky_assignor import assign
from tests.invariants import assert_balanced, assert_valid
from tests.strategies import clusters, consumer_groups, follow_up
from tests.test_sticky_kafka_model import kafka_constrained

Assignor = Callable[[Cluster, ConsumerGroup], ConsumerPlan]
RACKS = ("az-a", "az-b", "az-c")


def kafka(order: Sequence[str] | None = None) -> Assignor:
    """The model as a cooperative assignor: its target, minus what changes owner."""

    def run(cluster: Cluster, group: ConsumerGroup) -> ConsumerPlan:
        members = [m for m in order if m in {x.member_id for x in group.members}] if order else None
        return withhold_moving(kafka_constrained(cluster, group, members), previous_owners(cluster, group))

    return run


def two_rounds(assignor: Assignor, cluster: Cluster, group: ConsumerGroup) -> tuple[int, int, ConsumerPlan]:
    """(partitions moved over both rounds, cross-rack after the follow-up round, follow-up plan)."""
    subscribed = subscribed_partitions(cluster, group)
    plan = assignor(cluster, group)
    assert_valid(cluster, group, plan)
    group2 = follow_up(group, plan)
    final = assignor(cluster, group2)
    assert_valid(cluster, group2, final)
    moved = count_moved(plan, previous_owners(cluster, group), subscribed) + count_moved(
        final, previous_owners(cluster, group2), subscribed
    )
    return moved, cross_rack_count(cluster, group2, final), final


def skewed(n_members: int, n_topics: int, per_topic: int) -> tuple[Cluster, ConsumerGroup]:
    """One replica per partition, spread evenly over three racks; members 60/30/10% over them."""
    brokers = {b: RACKS[b % 3] for b in range(9)}
    topics = {
        f"topic-{t:02d}": tuple(((t * per_topic + p) % 9,) for p in range(per_topic)) for t in range(n_topics)
    }
    names = sorted(topics)
    members = tuple(
        Member(
            f"member-{i:04d}", RACKS[0] if i % 10 < 6 else RACKS[1] if i % 10 < 9 else RACKS[2], tuple(names)
        )
        for i in range(n_members)
    )
    return Cluster(brokers, topics), ConsumerGroup("g", "cooperative-sticky", members)


def converged(assignor: Assignor, cluster: Cluster, group: ConsumerGroup) -> ConsumerGroup:
    """The group after ``assignor`` has run until nothing is withheld: each member owns its partitions."""
    for _ in range(4):
        plan = assignor(cluster, group)
        group = follow_up(group, plan)
        if not plan.revoked:
            return group
    raise AssertionError("did not converge")


def without(group: ConsumerGroup, member_id: str) -> ConsumerGroup:
    return dataclasses.replace(group, members=tuple(m for m in group.members if m.member_id != member_id))


@pytest.mark.parametrize("leaver", ["member-0000", "member-0006", "member-0009"])
@pytest.mark.parametrize("prior", ["ours", "kafka"])
def test_one_member_of_a_60_30_10_group_leaves(leaver: str, prior: str) -> None:
    """The issue's case at small scale: 100 members, 100 single-replica partitions.

    60 members share the 34 partitions of their rack, so at least 26 members must
    read across racks however the partitions are dealt.  Kafka revokes every
    owned cross-rack partition and deals them again, moving many for nothing;
    we move at most the departed member's partition and never end with more
    cross-rack partitions.
    """
    cluster, group = skewed(100, 10, 10)
    ids = sorted(m.member_id for m in group.members)
    orders = [ids, ids[::-1], random.Random(7).sample(ids, len(ids))]
    start = converged(assign if prior == "ours" else kafka(orders[2]), cluster, group)
    left = without(start, leaver)
    moved, cross, final = two_rounds(assign, cluster, left)
    assert_balanced(left, final)
    assert moved <= 1
    for order in orders:
        kafka_moved, kafka_cross, kafka_final = two_rounds(kafka(order), cluster, left)
        assert_balanced(left, kafka_final)
        assert cross <= kafka_cross
        assert moved <= kafka_moved
    # With a prior that is not its own deal, Kafka re-deals every cross-rack partition.
    if prior == "ours":
        assert min(two_rounds(kafka(o), cluster, left)[0] for o in orders) >= 20


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_never_more_cross_rack_and_more_moves_only_for_less_cross_rack(data: st.DataObject) -> None:
    cluster = data.draw(clusters())
    group = data.draw(consumer_groups(cluster, "cooperative-sticky", max_members=6, equal_subscriptions=True))
    order = data.draw(st.permutations(sorted(m.member_id for m in group.members)))
    kafka_moved, kafka_cross, kafka_final = two_rounds(kafka(order), cluster, group)
    if kafka_final.revoked:
        return  # Kafka needs a third round here; no like-for-like comparison
    moved, cross, _final = two_rounds(assign, cluster, group)
    assert cross <= kafka_cross
    assert moved <= kafka_moved or cross < kafka_cross
