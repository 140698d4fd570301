"""Scenario tests of cooperative-sticky, modelled on Kafka's own sticky assignor tests.

Each test names the Kafka test it follows (``AbstractStickyAssignorTest`` and
``CooperativeStickyAssignorTest``, Kafka 3.5+).  Kafka's fixtures put every
partition on three brokers in three racks (or on rack-less brokers), so in the
first group rack locality is moot and the tests are about balance and
stickiness; the rack-aware tests use ``verifyRackAssignment``'s layouts.  Where
Kafka's expected assignment is the only one our priorities allow, it is
asserted exactly; where it reflects Kafka's hash-map iteration order, the
properties Kafka's test checks are asserted instead.

Deviations by design, from :mod:`rackplan.assignor.consumer.owned`: claims of members of an
older generation are dropped (Kafka 3.5+ keeps those that no newer member
contradicts), and a partition claimed twice in the newest generation is
unowned, so it is handed out at once instead of being withheld.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from rackplan.assignor.consumer import cross_rack_count, subscribed_partitions
from rackplan.assignor.consumer.owned import count_moved, previous_owners
from rackplan.assignor.consumer.sticky import assign
from rackplan.assignor.model import Cluster, ConsumerGroup, ConsumerPlan, Member, TopicPartition
from rackplan.assignor.record import replace
from tests.assignor.test_range import kafka_cluster, kafka_mismatches, null_racks, racks, tps
from tests.invariants import assert_balanced, assert_valid
from tests.strategies import follow_up

ALL_RACKS = ("a", "b", "c")
NO_BROKER_RACK, NO_CONSUMER_RACK, BROKER_AND_CONSUMER_RACK = "NO_BROKER_RACK", "NO_CONSUMER_RACK", "BOTH"
RACK_CONFIGS = (NO_BROKER_RACK, NO_CONSUMER_RACK, BROKER_AND_CONSUMER_RACK)

Assignment = Mapping[str, Sequence[TopicPartition]]


class Setup:
    """``AbstractStickyAssignorTest.initializeRacks``: replication factor 3 over 3 broker racks (or none).

    Topic ``k`` (in creation order) has partition ``i`` on brokers ``i + k, i + k + 1, i + k + 2``
    (mod the broker count), as ``partitionInfos`` with its per-call ``nextPartitionIndex`` builds it;
    consumer ``i`` sits in rack ``a``, ``b``, ``c`` (``i`` mod 3) unless consumers have no rack.
    """

    def __init__(self, config: str) -> None:
        self.broker_racks = config != NO_BROKER_RACK
        self.consumer_racks = config != NO_CONSUMER_RACK

    def cluster(self, topics: Mapping[str, int]) -> Cluster:
        n_brokers = 9 if self.broker_racks else 3
        brokers = {b: ALL_RACKS[b % 3] if self.broker_racks else None for b in range(n_brokers)}
        parts = {
            t: tuple(tuple((i + j + k) % n_brokers for j in range(3)) for i in range(n))
            for k, (t, n) in enumerate(topics.items())
        }
        return Cluster(broker_racks=brokers, topics=parts)

    def member(
        self, name: str, topics: Sequence[str], index: int, owned: Sequence[TopicPartition] = (), gen: int = 1
    ) -> Member:
        rack = ALL_RACKS[index % 3] if self.consumer_racks else None
        return Member(name, rack, tuple(sorted(topics)), tuple(owned), gen if owned else -1)


def group(*members: Member) -> ConsumerGroup:
    return ConsumerGroup("g", "cooperative-sticky", members)


def both_rounds(cluster: Cluster, g: ConsumerGroup) -> tuple[ConsumerPlan, ConsumerGroup, ConsumerPlan]:
    """This round, and the follow-up round Kafka's cooperative protocol triggers after revocations."""
    plan = assign(cluster, g)
    assert_valid(cluster, g, plan)
    g2 = follow_up(g, plan)
    final = assign(cluster, g2)
    assert_valid(cluster, g2, final)
    assert not final.revoked
    assert_balanced(g2, final)
    return plan, g2, final


def sorted_parts(*items: TopicPartition) -> list[TopicPartition]:
    return sorted(items)


# ---- AbstractStickyAssignorTest, under every RackConfig -------------------------------------


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_one_consumer_without_partitions(config: str) -> None:
    # testOneConsumerNoTopic, testOneConsumerNonexistentTopic
    s = Setup(config)
    assert assign(s.cluster({}), group(s.member("consumer", [], 0))).assignment == {"consumer": []}
    cluster = s.cluster({"topic": 0})
    assert assign(cluster, group(s.member("consumer", ["topic"], 0))).assignment == {"consumer": []}


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_one_consumer_gets_what_it_subscribes(config: str) -> None:
    # testOneConsumerOneTopic, testOnlyAssignsPartitionsFromSubscribedTopics, testOneConsumerMultipleTopics
    s = Setup(config)
    cluster = s.cluster({"topic": 3})
    plan = assign(cluster, group(s.member("consumer", ["topic"], 0)))
    assert plan.assignment == {"consumer": [("topic", 0), ("topic", 1), ("topic", 2)]}
    cluster = s.cluster({"topic": 2, "other": 2})
    owned = [("topic", 0), ("topic", 1), ("other", 0), ("other", 1)]
    plan = assign(cluster, group(s.member("consumer", ["topic"], 0, owned)))
    assert plan == ConsumerPlan({"consumer": [("topic", 0), ("topic", 1)]}, {})
    cluster = s.cluster({"topic1": 1, "topic2": 2})
    plan = assign(cluster, group(s.member("consumer", ["topic1", "topic2"], 0)))
    assert plan.assignment == {"consumer": [("topic1", 0), ("topic2", 0), ("topic2", 1)]}


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_two_consumers_one_topic(config: str) -> None:
    # testTwoConsumersOneTopicOnePartition, testTwoConsumersOneTopicTwoPartitions
    s = Setup(config)
    members = (s.member("consumer1", ["topic"], 0), s.member("consumer2", ["topic"], 1))
    plan = assign(s.cluster({"topic": 1}), group(*members))
    assert sorted(len(v) for v in plan.assignment.values()) == [0, 1]
    plan = assign(s.cluster({"topic": 2}), group(*members))
    assert plan == ConsumerPlan({"consumer1": [("topic", 0)], "consumer2": [("topic", 1)]}, {})


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_fresh_assignments_as_kafka_deals_them(config: str) -> None:
    # testMultipleConsumersMixedTopicSubscriptions, testTwoConsumersTwoTopicsSixPartitions
    s = Setup(config)
    cluster = s.cluster({"topic1": 3, "topic2": 2})
    plan = assign(
        cluster,
        group(
            s.member("consumer1", ["topic1"], 0),
            s.member("consumer2", ["topic1", "topic2"], 1),
            s.member("consumer3", ["topic1"], 2),
        ),
    )
    assert plan.assignment == {
        "consumer1": [("topic1", 0), ("topic1", 2)],
        "consumer2": [("topic2", 0), ("topic2", 1)],
        "consumer3": [("topic1", 1)],
    }
    cluster = s.cluster({"topic1": 3, "topic2": 3})
    both = ["topic1", "topic2"]
    plan = assign(cluster, group(s.member("consumer1", both, 0), s.member("consumer2", both, 1)))
    assert plan.assignment == {
        "consumer1": [("topic1", 0), ("topic1", 2), ("topic2", 1)],
        "consumer2": [("topic1", 1), ("topic2", 0), ("topic2", 2)],
    }


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_quota_edge_cases(config: str) -> None:
    # testConsumerOwningMinQuotaExpectedMaxQuota, testMaxQuotaConsumerMoreThanNumExpectedMaxCapacityMembers,
    # testAllConsumersAreUnderMinQuota
    s = Setup(config)
    both = ["topic1", "topic2"]
    cluster = s.cluster({"topic1": 2, "topic2": 3})
    g = group(
        s.member("consumer1", both, 0, [("topic1", 0), ("topic2", 1)]),
        s.member("consumer2", both, 1, [("topic1", 1), ("topic2", 2)]),
    )
    plan = assign(cluster, g)
    assert plan == ConsumerPlan(
        {
            "consumer1": [("topic1", 0), ("topic2", 0), ("topic2", 1)],
            "consumer2": [("topic1", 1), ("topic2", 2)],
        },
        {},
    )

    cluster = s.cluster({"topic1": 2, "topic2": 2})
    g = group(
        s.member("consumer1", both, 0, [("topic1", 0), ("topic2", 0)]),
        s.member("consumer2", both, 1, [("topic1", 1), ("topic2", 1)]),
        s.member("consumer3", both, 2, [], 1),
    )
    plan, _g2, final = both_rounds(cluster, g)
    # One of the two full members gives one partition up; consumer3 gets it in the follow-up round.
    assert sum(len(v) for v in plan.revoked.values()) == 1
    assert plan.assignment["consumer3"] == []
    assert [len(final.assignment[c]) for c in ("consumer1", "consumer2", "consumer3")].count(1) == 2
    assert final.assignment["consumer3"] == [tp for v in plan.revoked.values() for tp in v]

    cluster = s.cluster({"topic1": 2, "topic2": 3})
    g = group(
        s.member("consumer1", both, 0, [("topic1", 0)]),
        s.member("consumer2", both, 1, [("topic1", 1)]),
        s.member("consumer3", both, 2, [], 1),
    )
    plan = assign(cluster, g)
    assert not plan.revoked
    assert ("topic1", 0) in plan.assignment["consumer1"] and ("topic1", 1) in plan.assignment["consumer2"]
    assert sorted(len(v) for v in plan.assignment.values()) == [1, 2, 2]


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_add_remove_consumer_one_topic(config: str) -> None:
    # testAddRemoveConsumerOneTopic
    s = Setup(config)
    cluster = s.cluster({"topic": 3})
    plan = assign(cluster, group(s.member("consumer1", ["topic"], 0)))
    owned1 = plan.assignment["consumer1"]
    g = group(s.member("consumer1", ["topic"], 0, owned1), s.member("consumer2", ["topic"], 1, [], 1))
    plan, _g2, final = both_rounds(cluster, g)
    assert plan == ConsumerPlan(
        {"consumer1": [("topic", 0), ("topic", 1)], "consumer2": []}, {"consumer1": [("topic", 2)]}
    )
    assert final.assignment == {"consumer1": [("topic", 0), ("topic", 1)], "consumer2": [("topic", 2)]}
    g = group(s.member("consumer2", ["topic"], 1, final.assignment["consumer2"], 2))
    assert assign(cluster, g) == ConsumerPlan({"consumer2": [("topic", 0), ("topic", 1), ("topic", 2)]}, {})


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_add_remove_two_consumers_two_topics(config: str) -> None:
    # testAddRemoveTwoConsumersTwoTopics
    s = Setup(config)
    both = ["topic1", "topic2"]
    cluster = s.cluster({"topic1": 3, "topic2": 4})
    plan = assign(cluster, group(s.member("consumer1", both, 0), s.member("consumer2", both, 1)))
    assert plan.assignment == {
        "consumer1": [("topic1", 0), ("topic1", 2), ("topic2", 1), ("topic2", 3)],
        "consumer2": [("topic1", 1), ("topic2", 0), ("topic2", 2)],
    }
    g = group(
        s.member("consumer1", both, 0, plan.assignment["consumer1"]),
        s.member("consumer2", both, 1, plan.assignment["consumer2"]),
        s.member("consumer3", both, 2, [], 1),
        s.member("consumer4", both, 3, [], 1),
    )
    plan, _g2, final = both_rounds(cluster, g)
    # Kafka moves three partitions (4 + 3 -> 2 + 2 + 2 + 1) and so do we; nothing else moves.
    assert count_moved(final, previous_owners(cluster, g), subscribed_partitions(cluster, g)) == 3
    assert sorted(len(v) for v in final.assignment.values()) == [1, 2, 2, 2]
    g = group(
        s.member("consumer3", both, 2, final.assignment["consumer3"], 2),
        s.member("consumer4", both, 3, final.assignment["consumer4"], 2),
    )
    plan = assign(cluster, g)
    assert not plan.revoked
    assert sorted(len(v) for v in plan.assignment.values()) == [3, 4]
    for c in ("consumer3", "consumer4"):
        assert set(final.assignment[c]) <= set(plan.assignment[c])


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_poor_round_robin_scenario(config: str) -> None:
    # testPoorRoundRobinAssignmentScenario
    s = Setup(config)
    cluster = s.cluster({f"topic{i}": (i % 2) + 1 for i in range(1, 6)})
    everything = [f"topic{i}" for i in range(1, 6)]
    odd = ["topic1", "topic3", "topic5"]
    g = group(
        s.member("consumer1", everything, 0),
        s.member("consumer2", odd, 1),
        s.member("consumer3", odd, 2),
        s.member("consumer4", everything, 3),
    )
    plan = assign(cluster, g)
    assert not plan.revoked
    assert_balanced(g, plan)
    assert sorted(len(v) for v in plan.assignment.values()) == [2, 2, 2, 2]


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_add_remove_topic_two_consumers(config: str) -> None:
    # testAddRemoveTopicTwoConsumers
    s = Setup(config)
    cluster = s.cluster({"topic": 3})
    plan = assign(cluster, group(s.member("consumer1", ["topic"], 0), s.member("consumer2", ["topic"], 1)))
    first = plan.assignment
    assert sorted(len(v) for v in first.values()) == [1, 2]
    cluster = s.cluster({"topic": 3, "topic2": 3})
    topics = ["topic", "topic2"]
    g = group(
        s.member("consumer1", topics, 0, first["consumer1"]),
        s.member("consumer2", topics, 1, first["consumer2"]),
    )
    plan = assign(cluster, g)
    assert not plan.revoked
    second = plan.assignment
    assert [len(second[c]) for c in ("consumer1", "consumer2")] == [3, 3]
    for c in first:
        assert set(first[c]) <= set(second[c])
    cluster = s.cluster({"topic2": 3})
    g = group(
        s.member("consumer1", ["topic2"], 0, second["consumer1"]),
        s.member("consumer2", ["topic2"], 1, second["consumer2"]),
    )
    plan = assign(cluster, g)
    assert not plan.revoked
    assert sorted(len(v) for v in plan.assignment.values()) == [1, 2]
    for c in first:
        assert set(plan.assignment[c]) <= set(second[c])


def movements_are_sticky(before: Assignment, after: Assignment) -> bool:
    """``PartitionMovements.isSticky``: no topic has partitions moving both ways between two members."""
    holder_before = {tp: m for m, v in before.items() for tp in v}
    pairs = {
        (holder_before[tp], m, tp[0]) for m, v in after.items() for tp in v if holder_before.get(tp, m) != m
    }
    return not any((b, a, t) in pairs for a, b, t in pairs)


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_reassignment_after_one_consumer_leaves(config: str) -> None:
    # testReassignmentAfterOneConsumerLeaves
    s = Setup(config)
    cluster = s.cluster({f"t{i:02d}": i for i in range(1, 20)})
    members = [s.member(f"c{i:02d}", [f"t{j:02d}" for j in range(1, i + 1)], i) for i in range(1, 20)]
    plan = assign(cluster, group(*members))
    assert_balanced(group(*members), plan)
    g = follow_up(group(*members), plan)
    g = replace(g, members=tuple(m for m in g.members if m.member_id != "c10"))
    plan, _g2, final = both_rounds(cluster, g)
    assert movements_are_sticky(
        {m.member_id: m.owned for m in g.members}, {m: list(v) for m, v in final.assignment.items()}
    )


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_same_subscriptions_one_leaves(config: str) -> None:
    # testSameSubscriptions, testReassignmentAfterOneConsumerAdded
    s = Setup(config)
    cluster = s.cluster({f"t{i:02d}": i for i in range(1, 15)})
    topics = list(cluster.topics)
    members = [s.member(f"c{i}", topics, i) for i in range(1, 9)]
    plan = assign(cluster, group(*members))
    assert not plan.revoked
    g = follow_up(group(*members), plan)
    g = replace(g, members=tuple(m for m in g.members if m.member_id != "c5"))
    plan = assign(cluster, g)
    assert not plan.revoked  # only c5's partitions move, and nobody owns them any more
    assert_balanced(g, plan)
    cluster = s.cluster({"topic": 20})
    members = [s.member(f"c{i:02d}", ["topic"], i) for i in range(1, 10)]
    plan = assign(cluster, group(*members))
    g = follow_up(group(*members), plan)
    g = replace(g, members=(*g.members, s.member("c10", ["topic"], 10, [], 2)))
    plan, _g2, final = both_rounds(cluster, g)
    assert len(final.assignment["c10"]) == 2
    assert sum(len(v) for v in plan.revoked.values()) == 2


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_new_subscription_and_moving_existing_assignments(config: str) -> None:
    # testNewSubscription, testMoveExistingAssignments
    s = Setup(config)
    cluster = s.cluster({f"t{i}": 1 for i in range(1, 5)})
    subs = [[f"t{j}" for j in range(i, 3 * i - 1)] for i in range(3)]
    members = [s.member(f"c{i}", subs[i], i) for i in range(3)]
    plan = assign(cluster, group(*members))
    g = follow_up(group(*members), plan)
    g = replace(g, members=(replace(g.members[0], topics=("t1",)), *g.members[1:]))
    both_rounds(cluster, g)
    cluster = s.cluster({f"topic{i}": 1 for i in range(1, 7)})
    g = group(
        s.member("consumer1", ["topic1", "topic2"], 0, [("topic1", 0)]),
        s.member("consumer2", ["topic1", "topic2", "topic3", "topic4"], 1, [("topic2", 0), ("topic3", 0)]),
        s.member(
            "consumer3",
            ["topic2", "topic3", "topic4", "topic5", "topic6"],
            2,
            [("topic4", 0), ("topic5", 0), ("topic6", 0)],
        ),
    )
    both_rounds(cluster, g)


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_stickiness_when_a_consumer_leaves(config: str) -> None:
    # testStickiness
    s = Setup(config)
    cluster = s.cluster({"topic1": 3})
    members = [s.member(f"consumer{i}", ["topic1"], i - 1) for i in range(1, 5)]
    plan = assign(cluster, group(*members))
    g = follow_up(group(*members), plan)
    holder = {tp: m for m, v in plan.assignment.items() for tp in v}
    leaving = holder[("topic1", 0)]
    g = replace(g, members=tuple(m for m in g.members if m.member_id != leaving))
    plan = assign(cluster, g)
    assert not plan.revoked
    for tp, m in holder.items():
        if m != leaving:
            assert tp in plan.assignment[m]


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_deleted_topics(config: str) -> None:
    # testAssignmentUpdatedForDeletedTopic, testNoExceptionThrownWhenOnlySubscribedTopicDeleted
    s = Setup(config)
    cluster = s.cluster({"topic01": 1, "topic03": 100})
    g = group(s.member("consumer", ["topic01", "topic03"], 0))
    plan = assign(cluster, g)
    assert len(plan.assignment["consumer"]) == 101
    cluster = s.cluster({"topic": 0})
    g = group(s.member("consumer", ["topic"], 0, [("topic", 0), ("topic", 1)]))
    assert assign(cluster, g) == ConsumerPlan({"consumer": []}, {})


# ---- generations and conflicting claims (assignor/consumer/owned.py rules) ---------------------------


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_claims_of_older_generations_are_dropped(config: str) -> None:
    # testOwnedPartitionsAreInvalidatedForConsumerWithStaleGeneration, ...WithNoGeneration,
    # ...WithMultipleGeneration
    s = Setup(config)
    topics = ["topic", "topic2"]
    cluster = s.cluster({"topic": 3, "topic2": 3})
    claims = [("topic", 0), ("topic", 2), ("topic2", 1)]
    for stale in (9, -1):
        g = group(
            s.member("consumer1", topics, 0, claims, 10), s.member("consumer2", topics, 1, claims, stale)
        )
        plan = assign(cluster, g)
        assert plan == ConsumerPlan(
            {"consumer1": claims, "consumer2": [("topic", 1), ("topic2", 0), ("topic2", 2)]}, {}
        )
    g = group(
        s.member("consumer1", topics, 0, [("topic", 0), ("topic2", 1), ("topic", 1)], 10),
        s.member("consumer2", topics, 1, [("topic", 0), ("topic2", 1), ("topic2", 2)], 8),
    )
    plan = assign(cluster, g)
    assert plan.assignment["consumer1"] == [("topic", 0), ("topic", 1), ("topic2", 1)]
    assert plan.assignment["consumer2"] == [("topic", 2), ("topic2", 0), ("topic2", 2)]
    assert not plan.revoked


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_highest_generation_keeps_its_partitions(config: str) -> None:
    # testEnsurePartitionsAssignedToHighestGeneration, testNoReassignmentOnCurrentMembers
    # Deviation: Kafka also keeps uncontested claims of older generations; assignor/consumer/owned.py drops them.
    s = Setup(config)
    topics = ["topic", "topic2", "topic3"]
    cluster = s.cluster({"topic": 3, "topic2": 3, "topic3": 3})
    g = group(
        s.member("consumer1", topics, 0, [("topic", 0), ("topic2", 0), ("topic3", 0)], 10),
        s.member("consumer2", topics, 1, [("topic", 1), ("topic2", 1), ("topic3", 1)], 9),
        s.member("consumer3", topics, 2, [("topic2", 1), ("topic3", 0), ("topic3", 2)], 8),
    )
    plan = assign(cluster, g)
    assert plan.assignment["consumer1"] == [("topic", 0), ("topic2", 0), ("topic3", 0)]
    assert not plan.revoked
    assert_balanced(g, plan)


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_partition_claimed_twice_in_one_generation(config: str) -> None:
    # testPartitionsTransferringOwnershipIncludeThePartitionClaimedByMultipleConsumersInSameGeneration,
    # CooperativeStickyAssignorTest.testAllConsumersHaveOwnedPartitionInvalidatedWhenClaimedByMultipleConsumers-
    # InSameGenerationWith{Equal,Unequal}PartitionsPerConsumer.
    # As in Kafka, the doubly claimed partition is withheld this round and revoked by both claimers
    # (both may be consuming it); the follow-up round hands it out.
    s = Setup(config)
    for n_parts in (3, 4):
        cluster = s.cluster({"topic": n_parts})
        g = group(
            s.member("consumer1", ["topic"], 0, [("topic", 0), ("topic", 1)]),
            s.member("consumer2", ["topic"], 1, [("topic", 0), ("topic", 2)]),
            s.member("consumer3", ["topic"], 2, [], 1),
        )
        plan = assign(cluster, g)
        assert plan.revoked == {"consumer1": [("topic", 0)], "consumer2": [("topic", 0)]}
        assert all(("topic", 0) not in parts for parts in plan.assignment.values())
        assert ("topic", 1) in plan.assignment["consumer1"] and ("topic", 2) in plan.assignment["consumer2"]
        assert plan.assignment["consumer3"] == ([] if n_parts == 3 else [("topic", 3)])


# ---- rack-aware tests: AbstractStickyAssignorTest.testRackAware* -----------------------------

T1_T2_T3 = {"t1": 6, "t2": 7, "t3": 2}
ALL = ["t1", "t2", "t3"]
RACK_ALIGNED = [
    "t1-0, t1-3, t2-0, t2-3, t2-6",
    "t1-1, t1-4, t2-1, t2-4, t3-0",
    "t1-2, t1-5, t2-2, t2-5, t3-1",
]
MISALIGNED_OWNED = [
    "t1-0, t1-1, t1-2, t1-3, t1-4",
    "t1-5, t2-0, t2-1, t2-2, t2-3",
    "t2-4, t2-5, t2-6, t3-0, t3-1",
]


def rack_case(
    rf: int,
    broker_racks: Sequence[str | None],
    consumer_racks: Sequence[str | None],
    consumer_topics: Sequence[Sequence[str]],
    owned: Sequence[str] | None = None,
) -> tuple[Cluster, ConsumerGroup, ConsumerPlan, ConsumerPlan]:
    """``verifyRackAssignment``'s layout; returns (cluster, group, this round, follow-up round)."""
    cluster = kafka_cluster(T1_T2_T3, rf, broker_racks)
    g = group(
        *(
            Member(
                f"consumer{i}",
                rack,
                tuple(sorted(consumer_topics[i])),
                tuple(tps(owned[i])) if owned else (),
                1,
            )
            for i, rack in enumerate(consumer_racks)
        )
    )
    plan, _g2, final = both_rounds(cluster, g)
    return cluster, g, plan, final


def mismatches(cluster: Cluster, g: ConsumerGroup, assignment: Assignment) -> int:
    """``verifyRackAssignment``'s count of partitions with no replica on their racked member's rack."""
    return kafka_mismatches(cluster, g, {m: list(v) for m, v in assignment.items()})


def as_strings(plan: ConsumerPlan, n: int) -> list[str]:
    return [", ".join(f"{t}-{p}" for t, p in plan.assignment[f"consumer{i}"]) for i in range(n)]


def test_rack_aware_uniform_subscription() -> None:
    # testRackAwareAssignmentWithUniformSubscription
    for rf in (1, 2, 3):
        cluster, g, plan, _ = rack_case(rf, racks(3), racks(3), [ALL] * 3)
        assert as_strings(plan, 3) == RACK_ALIGNED
        assert mismatches(cluster, g, plan.assignment) == 0
    for brokers, consumers in ((null_racks(3), racks(3)), (racks(3), null_racks(3)), (racks(4), racks(3))):
        cluster, g, plan, _ = rack_case(3, brokers, consumers, [ALL] * 3)
        assert sorted(len(v) for v in plan.assignment.values()) == [5, 5, 5]
        assert cross_rack_count(cluster, g, plan) == 0
    # One consumer on a rack with no partitions: it must read five partitions from elsewhere.
    cluster, g, plan, _ = rack_case(3, racks(2), racks(3), [ALL] * 3)
    assert mismatches(cluster, g, plan.assignment) == 5
    # Misaligned owned partitions: the follow-up round ends rack-aligned, as Kafka's does.
    cluster, g, plan, final = rack_case(1, racks(3), racks(3), [ALL] * 3, MISALIGNED_OWNED)
    assert as_strings(final, 3) == RACK_ALIGNED
    # Stickiness when racks match: an aligned group stays as it is.
    cluster, g, plan, final = rack_case(3, racks(3), racks(3), [ALL] * 3, RACK_ALIGNED)
    assert as_strings(plan, 3) == RACK_ALIGNED and not plan.revoked


def test_rack_aware_non_equal_subscription() -> None:
    # testRackAwareAssignmentWithNonEqualSubscription
    topics = [ALL, ALL, ["t1", "t3"]]
    # Kafka: four mismatches with one replica per partition, none with two.
    cluster, g, plan, _ = rack_case(1, racks(3), racks(3), topics)
    assert mismatches(cluster, g, plan.assignment) <= 4
    cluster, g, plan, _ = rack_case(2, racks(3), racks(3), topics)
    assert mismatches(cluster, g, plan.assignment) == 0
    cluster, g, plan, _ = rack_case(3, racks(2), racks(3), topics)
    # Kafka's test expects 5; the count shifts of the general path find a balanced assignment with 4.
    assert mismatches(cluster, g, plan.assignment) <= 5
    # Misaligned owned partitions, one replica each: Kafka ends with 4 mismatches after moving 12
    # partitions; we end with no more mismatches and fewer moves.
    kafka_final = {
        f"consumer{i}": tps(s)
        for i, s in enumerate(
            ["t1-3, t2-0, t2-2, t2-3, t2-6", "t1-4, t2-1, t2-4, t2-5, t3-0", "t1-0, t1-1, t1-2, t1-5, t3-1"]
        )
    }
    cluster, g, plan, final = rack_case(1, racks(3), racks(3), topics, MISALIGNED_OWNED)
    owners, subscribed = previous_owners(cluster, g), subscribed_partitions(cluster, g)
    kafka_moves = count_moved(ConsumerPlan(kafka_final), owners, subscribed)
    assert kafka_moves == 12
    assert mismatches(cluster, g, final.assignment) <= mismatches(cluster, g, kafka_final)
    assert count_moved(final, owners, subscribed) < kafka_moves
    # All racks everywhere: Kafka's cooperative final assignment moves 6 partitions (3 of them the ones
    # consumer2 no longer subscribes to) and ends 5/5/5.  The contract's rule also allows 5/6/4, and we
    # take the fewest moves among balanced assignments: 5.
    cluster, g, plan, final = rack_case(3, racks(3), racks(3), topics, MISALIGNED_OWNED)
    kafka_final = {
        f"consumer{i}": tps(s)
        for i, s in enumerate(
            ["t1-2, t1-3, t1-4, t2-4, t2-5", "t2-0, t2-1, t2-2, t2-3, t2-6", "t1-0, t1-1, t1-5, t3-0, t3-1"]
        )
    }
    owners, subscribed = previous_owners(cluster, g), subscribed_partitions(cluster, g)
    assert count_moved(final, owners, subscribed) < count_moved(ConsumerPlan(kafka_final), owners, subscribed)
    assert mismatches(cluster, g, final.assignment) == 0
