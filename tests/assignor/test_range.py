"""The range assignor must give exactly what Kafka's ``RangeAssignor`` (3.5+, KIP-881) gives.

Scenario tests reproduce Kafka's own ``RangeAssignorTest`` cases (named in each
test) with the cluster layouts its helpers in ``AbstractPartitionAssignorTest``
build.  Property tests check the contract's invariants and compare the fast
implementation against a plain transcription of Kafka's algorithm.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.assignor.consumer.range_assignor import (
    _co_partitioned_pass,
    _fill,
    _member_key,
    _rack_pass_and_fill,
    _rack_pass_py,
    _TopicState,
    assign,
    kafka_member_order,
    plain_ranges,
    range_assignment,
)
from rackplan.assignor.model import Cluster, ConsumerGroup, Member, TopicPartition
from rackplan.assignor.record import replace
from tests.invariants import assert_range_balanced, assert_valid
from tests.strategies import clusters, consumer_groups

if TYPE_CHECKING:
    from rackplan.assignor.flow.compiled import Core

ALL_RACKS = ("a", "b", "c", "d", "e", "f")  # AbstractPartitionAssignorTest.ALL_RACKS
NO_BROKER_RACK, NO_CONSUMER_RACK, BROKER_AND_CONSUMER_RACK = "NO_BROKER_RACK", "NO_CONSUMER_RACK", "BOTH"
RACK_CONFIGS = (NO_BROKER_RACK, NO_CONSUMER_RACK, BROKER_AND_CONSUMER_RACK)

Assignment = dict[str, list[TopicPartition]]


# ---- Kafka's test fixtures, rebuilt on the model ---------------------------


def kafka_replicas(n: int, rf: int, n_brokers: int, next_index: int) -> tuple[tuple[int, ...], ...]:
    """``AbstractPartitionAssignorTest.partitionInfos``: partition i on brokers i+j+next (mod brokers)."""
    return tuple(tuple((i + j + next_index) % n_brokers for j in range(rf)) for i in range(n))


def kafka_cluster(topics: Mapping[str, int], rf: int, broker_racks: Sequence[str | None]) -> Cluster:
    """``AbstractPartitionAssignorTest.partitionsPerTopic``: topics in order, node index carried over."""
    parts: dict[str, tuple[tuple[int, ...], ...]] = {}
    next_index = 0
    for t, n in topics.items():
        parts[t] = kafka_replicas(n, rf, len(broker_racks), next_index)
        next_index += n
    return Cluster(broker_racks=dict(enumerate(broker_racks)), topics=parts)


def racks(n: int) -> list[str | None]:
    return [ALL_RACKS[i % len(ALL_RACKS)] for i in range(n)]


def null_racks(n: int) -> list[str | None]:
    return [None] * n


def tps(text: str) -> list[TopicPartition]:
    """``"t1-0, t2-3"`` -> sorted topic partitions (Kafka's test notation)."""
    if not text:
        return []
    out = []
    for item in text.split(", "):
        topic, _, p = item.rpartition("-")
        out.append((topic, int(p)))
    return sorted(out)


def kafka_mismatches(cluster: Cluster, group: ConsumerGroup, assignment: Assignment) -> int:
    """``verifyRackAssignment``'s count: a racked member's partition with no replica on its rack."""
    rack = {m.member_id: m.rack for m in group.members}
    return sum(
        1
        for mid, parts in assignment.items()
        if rack[mid] is not None
        for t, p in parts
        if rack[mid] not in cluster.replica_racks(t, p)
    )


def verify_rack_assignment(
    topics: Mapping[str, int],
    rf: int,
    broker_racks: Sequence[str | None],
    consumer_racks: Sequence[str | None],
    consumer_topics: Sequence[Sequence[str]],
    expected: Sequence[str],
    mismatches: int,
    *,
    prefer_rack_aware: bool = False,
) -> None:
    """``AbstractPartitionAssignorTest.verifyRackAssignment`` for the range assignor."""
    cluster = kafka_cluster(topics, rf, broker_racks)
    group = ConsumerGroup(
        "g",
        "range",
        tuple(
            Member(f"consumer{i}", rack, tuple(sorted(consumer_topics[i])))
            for i, rack in enumerate(consumer_racks)
        ),
    )
    got = range_assignment(cluster, group, prefer_rack_aware=prefer_rack_aware)
    assert got == {f"consumer{i}": tps(e) for i, e in enumerate(expected)}
    if mismatches >= 0:
        assert kafka_mismatches(cluster, group, got) == mismatches
    if not prefer_rack_aware and all(t in cluster.topics for m in group.members for t in m.topics):
        plan = assign(cluster, group)
        assert_valid(cluster, group, plan)
        assert_range_balanced(group, plan)


def verify_non_rack_aware_assignment(
    topics: Mapping[str, int], consumer_topics: Sequence[Sequence[str]], expected: Sequence[str]
) -> None:
    """``RangeAssignorTest.verifyNonRackAwareAssignment``: layouts where racks cannot matter."""
    verify_rack_assignment(topics, 3, null_racks(3), racks(3), consumer_topics, expected, -1)
    verify_rack_assignment(topics, 3, racks(3), null_racks(3), consumer_topics, expected, -1)
    verify_rack_assignment(topics, 3, racks(3), racks(3), consumer_topics, expected, 0)
    verify_rack_assignment(topics, 4, racks(4), racks(3), consumer_topics, expected, 0)
    verify_rack_assignment(topics, 3, racks(3), ["d", "e", "f"], consumer_topics, expected, -1)
    verify_rack_assignment(topics, 3, racks(3), [None, "e", "f"], consumer_topics, expected, -1)
    verify_rack_assignment(
        topics, 3, racks(3), racks(3), consumer_topics, expected, 0, prefer_rack_aware=True
    )


class RackConfigSetup:
    """``RangeAssignorTest.initializeRacks``: rf = max consumers, that many broker racks, consumer
    ``i`` on rack ``i`` (mod racks), and ``preferRackAwareLogic`` on, as the Kafka tests set it."""

    def __init__(self, config: str, max_consumers: int = 3) -> None:
        self.rf = max_consumers
        self.n_broker_racks = 0 if config == NO_BROKER_RACK else max_consumers
        self.consumer_racks = config != NO_CONSUMER_RACK

    def cluster(self, topics: Mapping[str, int]) -> Cluster:
        nb = self.n_broker_racks
        n_brokers = self.rf if nb <= 0 else nb * self.rf
        brokers = {b: (None if nb <= 0 else ALL_RACKS[b % nb]) for b in range(n_brokers)}
        # partitionInfos(topic, n, rf, numBrokerRacks, 0): every topic starts at node 0
        parts = {t: kafka_replicas(n, self.rf, n_brokers, 0) for t, n in topics.items()}
        return Cluster(broker_racks=brokers, topics=parts)

    def member(
        self, member_id: str, topics: Sequence[str], index: int, instance: str | None = None
    ) -> Member:
        n = self.n_broker_racks if self.n_broker_racks > 0 else len(ALL_RACKS)
        rack = ALL_RACKS[index % n] if self.consumer_racks else None
        return Member(member_id, rack, tuple(sorted(topics)), group_instance_id=instance)

    def run(self, cluster: Cluster, *members: Member) -> Assignment:
        return range_assignment(cluster, ConsumerGroup("g", "range", members), prefer_rack_aware=True)


def two_topics(n1: int, n2: int) -> dict[str, int]:
    return {"topic1": n1, "topic2": n2}


# ---- RangeAssignorTest: cases run under every RackConfig -------------------


@pytest.mark.parametrize("with_rack", [True, False])
def test_one_consumer_no_topic_or_nonexistent_topic(with_rack: bool) -> None:
    # testOneConsumerNoTopic, testOneConsumerNonexistentTopic
    setup = RackConfigSetup(BROKER_AND_CONSUMER_RACK if with_rack else NO_CONSUMER_RACK)
    cluster = setup.cluster({})
    assert setup.run(cluster, setup.member("consumer1", [], 0)) == {"consumer1": []}
    assert setup.run(cluster, setup.member("consumer1", ["topic1"], 0)) == {"consumer1": []}


def test_topic_without_partitions_is_skipped() -> None:
    # AbstractPartitionAssignor.assign drops topics whose metadata lists no partitions.
    cluster = Cluster(broker_racks={1: "a", 2: "b"}, topics={"t": (), "u": ((1,), (2,))})
    group = ConsumerGroup("g", "range", (Member("m1", "b", ("t", "u")), Member("m2", "a", ("t", "u"))))
    assert range_assignment(cluster, group) == {"m1": [("u", 1)], "m2": [("u", 0)]}


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_one_consumer_one_topic_and_only_subscribed_topics(config: str) -> None:
    # testOneConsumerOneTopic, testOnlyAssignsPartitionsFromSubscribedTopics
    setup = RackConfigSetup(config)
    cluster = setup.cluster({"topic1": 3, "other": 3})
    got = setup.run(cluster, setup.member("consumer1", ["topic1"], 0))
    assert got == {"consumer1": [("topic1", 0), ("topic1", 1), ("topic1", 2)]}


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_one_consumer_multiple_topics(config: str) -> None:
    # testOneConsumerMultipleTopics
    setup = RackConfigSetup(config)
    got = setup.run(setup.cluster(two_topics(1, 2)), setup.member("consumer1", ["topic1", "topic2"], 0))
    assert got == {"consumer1": [("topic1", 0), ("topic2", 0), ("topic2", 1)]}


@pytest.mark.parametrize("config", RACK_CONFIGS)
@pytest.mark.parametrize(
    ("n", "expected"), [(1, ([("topic1", 0)], [])), (2, ([("topic1", 0)], [("topic1", 1)]))]
)
def test_two_consumers_one_topic(
    config: str, n: int, expected: tuple[list[TopicPartition], list[TopicPartition]]
) -> None:
    # testTwoConsumersOneTopicOnePartition, testTwoConsumersOneTopicTwoPartitions
    setup = RackConfigSetup(config)
    got = setup.run(
        setup.cluster({"topic1": n}),
        setup.member("consumer1", ["topic1"], 0),
        setup.member("consumer2", ["topic1"], 1),
    )
    assert got == {"consumer1": expected[0], "consumer2": expected[1]}


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_multiple_consumers_mixed_topics(config: str) -> None:
    # testMultipleConsumersMixedTopics
    setup = RackConfigSetup(config)
    got = setup.run(
        setup.cluster(two_topics(3, 2)),
        setup.member("consumer1", ["topic1"], 0),
        setup.member("consumer2", ["topic1", "topic2"], 1),
        setup.member("consumer3", ["topic1"], 2),
    )
    assert got == {
        "consumer1": [("topic1", 0)],
        "consumer2": [("topic1", 1), ("topic2", 0), ("topic2", 1)],
        "consumer3": [("topic1", 2)],
    }


@pytest.mark.parametrize("config", RACK_CONFIGS)
@pytest.mark.parametrize("instances", [(None, None), ("instance1", "instance2"), ("instance1", None)])
def test_two_consumers_two_topics_six_partitions(config: str, instances: tuple[str | None, ...]) -> None:
    # testTwoConsumersTwoTopicsSixPartitions (dynamic members "consumer1" < "consumer2");
    # testTwoStaticConsumersTwoTopicsSixPartitions and
    # testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions: "consumer-b" sorts first
    # because of its instance id, although "consumer-a" < "consumer-b".
    setup = RackConfigSetup(config)
    low, high = ("consumer1", "consumer2") if instances[0] is None else ("consumer-b", "consumer-a")
    both = ["topic1", "topic2"]
    got = setup.run(
        setup.cluster(two_topics(3, 3)),
        setup.member(low, both, 0, instances[0]),
        setup.member(high, both, 1, instances[1]),
    )
    assert got == {
        low: [("topic1", 0), ("topic1", 1), ("topic2", 0), ("topic2", 1)],
        high: [("topic1", 2), ("topic2", 2)],
    }


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_static_member_range_assignment_persistent(config: str) -> None:
    # testStaticMemberRangeAssignmentPersistent (initializeRacks(rackConfig, 5))
    setup = RackConfigSetup(config, 5)
    cluster = setup.cluster(two_topics(5, 4))
    both = ["topic1", "topic2"]
    static = [setup.member(f"consumer{i + 1}", both, i, f"instance{i + 1}") for i in range(3)]
    expected = {
        "consumer1": [("topic1", 0), ("topic1", 1), ("topic2", 0)],
        "consumer2": [("topic1", 2), ("topic2", 1)],
        "consumer3": [("topic1", 3), ("topic2", 2)],
    }
    got = setup.run(cluster, *static, setup.member("consumer4", both, 3))
    assert got == {**expected, "consumer4": [("topic1", 4), ("topic2", 3)]}
    # Replace dynamic member 4 with a new dynamic member 5.
    got = setup.run(cluster, *static, setup.member("consumer5", both, 4))
    assert got == {**expected, "consumer5": [("topic1", 4), ("topic2", 3)]}


def by_instance(members: Sequence[Member], got: Assignment) -> dict[str | None, list[TopicPartition]]:
    return {m.group_instance_id: got[m.member_id] for m in members}


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_static_member_range_assignment_persistent_after_member_id_changes(config: str) -> None:
    # testStaticMemberRangeAssignmentPersistentAfterMemberIdChanges
    setup = RackConfigSetup(config)
    cluster = setup.cluster(two_topics(5, 5))
    both = ["topic1", "topic2"]
    members = [setup.member(f"consumer{i + 1}", both, i, f"instance{i + 1}") for i in range(3)]
    expected = {
        "instance1": [("topic1", 0), ("topic1", 1), ("topic2", 0), ("topic2", 1)],
        "instance2": [("topic1", 2), ("topic1", 3), ("topic2", 2), ("topic2", 3)],
        "instance3": [("topic1", 4), ("topic2", 4)],
    }
    assert by_instance(members, setup.run(cluster, *members)) == expected
    # consumer3 -> consumer4, consumer2 -> consumer5: same instances, same assignment.
    renamed = [members[0], replace(members[2], member_id="consumer4")]
    renamed.append(replace(members[1], member_id="consumer5"))
    assert by_instance(renamed, setup.run(cluster, *renamed)) == expected


def test_rack_aware_static_member_range_assignment_persistent_after_member_id_changes() -> None:
    # testRackAwareStaticMemberRangeAssignmentPersistentAfterMemberIdChanges:
    # rf 2 over 6 brokers on racks a,b,c,a,b,c; instance i on rack ALL_RACKS[i].
    brokers = {b: ALL_RACKS[b % 3] for b in range(6)}
    parts = kafka_replicas(5, 2, 6, 0)
    cluster = Cluster(broker_racks=brokers, topics={"topic1": parts, "topic2": parts})
    both = ("topic1", "topic2")
    members = [
        Member(f"consumer{i + 1}", ALL_RACKS[i], both, group_instance_id=f"instance{i + 1}") for i in range(3)
    ]
    expected = {
        "instance1": [("topic1", 0), ("topic1", 2), ("topic2", 0), ("topic2", 2)],
        "instance2": [("topic1", 1), ("topic1", 3), ("topic2", 1), ("topic2", 3)],
        "instance3": [("topic1", 4), ("topic2", 4)],
    }
    for prefer in (True, False):  # the Kafka test runs with preferRackAwareLogic on; it must not matter
        got = range_assignment(cluster, ConsumerGroup("g", "range", tuple(members)), prefer_rack_aware=prefer)
        assert by_instance(members, got) == expected
    renamed = [members[0], replace(members[2], member_id="consumer4")]
    renamed.append(replace(members[1], member_id="consumer5"))
    got = range_assignment(cluster, ConsumerGroup("g", "range", tuple(renamed)))
    assert by_instance(renamed, got) == expected


# ---- RangeAssignorTest: rack-aware cases ------------------------------------

T1_T2_T3 = ["t1", "t2", "t3"]


# Kafka's four cases that vary only topics, subscriptions and expectations: the non-rack-aware
# assignment, then one rack-aware run per replication factor 1, 2 and 3 (brokers on racks(3),
# racks(3) and racks(2); consumers on racks(3)) with its expected assignment and mismatch count.
PLAIN_UNIFORM_PARTITIONS = [
    "t1-0, t1-1, t2-0, t2-1, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t2-4, t3-4"
]  # fmt: skip
KAFKA_RACK_CASES = [
    pytest.param(
        {"t1": 6, "t2": 7, "t3": 2}, [T1_T2_T3] * 3,
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"],
        [
            # Best effort for lower replication factors, where racks hold a subset of the partitions.
            (["t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"], 0),
            (["t1-0, t1-2, t2-0, t2-2, t2-3, t3-1", "t1-1, t1-3, t2-1, t2-4, t3-0", "t1-4, t1-5, t2-5, t2-6"], 1),
            # One consumer on a rack with no partitions.
            (["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"], 4),
        ],
        id="testRackAwareAssignmentWithUniformSubscription",
    ),
    pytest.param(
        {"t1": 6, "t2": 7, "t3": 2}, [T1_T2_T3, T1_T2_T3, ["t1", "t3"]],
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"],
        [
            (["t1-0, t1-3, t2-0, t2-2, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t2-5, t3-0", "t1-2, t1-5, t3-1"], 2),
            (["t1-0, t1-2, t2-0, t2-2, t2-3, t2-5, t3-1", "t1-1, t1-3, t2-1, t2-4, t2-6, t3-0", "t1-4, t1-5"], 0),
            (["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"], 2),
        ],
        id="testRackAwareAssignmentWithNonEqualSubscription",
    ),
    pytest.param(
        # Co-partitioning wins over rack alignment.
        {"t1": 5, "t2": 5, "t3": 5}, [T1_T2_T3] * 3, PLAIN_UNIFORM_PARTITIONS,
        [(PLAIN_UNIFORM_PARTITIONS, 10), (PLAIN_UNIFORM_PARTITIONS, 5), (PLAIN_UNIFORM_PARTITIONS, 3)],
        id="testRackAwareAssignmentWithUniformPartitions",
    ),
    pytest.param(
        {"t1": 5, "t2": 5, "t3": 5}, [T1_T2_T3, T1_T2_T3, ["t1", "t3"]],
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1", "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3", "t1-4, t3-4"],
        [
            (["t1-0, t1-1, t2-0, t2-1, t2-4, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t3-4"], 9),
            (["t1-2, t2-0, t2-1, t2-3, t3-2", "t1-0, t1-3, t2-2, t2-4, t3-0, t3-3", "t1-1, t1-4, t3-1, t3-4"], 0),
            (["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1", "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3", "t1-4, t3-4"], 2),
        ],
        id="testRackAwareAssignmentWithUniformPartitionsNonEqualSubscription",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("topics", "subs", "plain", "by_rf"), KAFKA_RACK_CASES)
def test_rack_aware_assignment_by_replication_factor(
    topics: dict[str, int], subs: list[list[str]], plain: list[str], by_rf: list[tuple[list[str], int]]
) -> None:
    verify_non_rack_aware_assignment(topics, subs, plain)
    for rf, (expected, mismatches) in enumerate(by_rf, start=1):
        broker_racks = racks(2) if rf == 3 else racks(3)
        verify_rack_assignment(topics, rf, broker_racks, racks(3), subs, expected, mismatches)


def test_rack_aware_assignment_with_co_partitioning() -> None:
    # testRackAwareAssignmentWithCoPartitioning
    topics = {"t1": 6, "t2": 6, "t3": 2, "t4": 2}
    consumer_racks: list[str | None] = ["a", "b", "b", "a"]
    subs = [["t1", "t2"], ["t1", "t2"], ["t3", "t4"], ["t3", "t4"]]
    plain = [
        "t1-0, t1-1, t1-2, t2-0, t2-1, t2-2",
        "t1-3, t1-4, t1-5, t2-3, t2-4, t2-5",
        "t3-0, t4-0",
        "t3-1, t4-1",
    ]
    verify_rack_assignment(topics, 3, racks(2), consumer_racks, subs, plain, -1)
    verify_rack_assignment(topics, 2, racks(2), consumer_racks, subs, plain, 0)
    verify_rack_assignment(
        topics, 1, racks(2), consumer_racks, subs,
        ["t1-0, t1-2, t1-4, t2-0, t2-2, t2-4", "t1-1, t1-3, t1-5, t2-1, t2-3, t2-5", "t3-1, t4-1", "t3-0, t4-0"], 0,
    )  # fmt: skip

    subs = [["t1", "t2", "t3", "t4"]] * 4
    plain = [
        "t1-0, t1-1, t2-0, t2-1, t3-0, t4-0",
        "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1",
        "t1-4, t2-4",
        "t1-5, t2-5",
    ]
    verify_rack_assignment(topics, 3, racks(2), consumer_racks, subs, plain, -1)
    verify_rack_assignment(topics, 2, racks(2), consumer_racks, subs, plain, 0)
    verify_rack_assignment(
        topics, 1, racks(2), consumer_racks, subs,
        ["t1-0, t1-2, t2-0, t2-2, t3-0, t4-0", "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1", "t1-5, t2-5", "t1-4, t2-4"], 0,
    )  # fmt: skip
    verify_rack_assignment(
        topics, 1, racks(3), consumer_racks, subs,
        ["t1-0, t1-3, t2-0, t2-3, t3-0, t4-0", "t1-1, t1-4, t2-1, t2-4, t3-1, t4-1", "t1-2, t2-2", "t1-5, t2-5"], 6,
    )  # fmt: skip


def test_co_partitioned_assignment_with_same_subscription() -> None:
    # testCoPartitionedAssignmentWithSameSubscription (t7..t9 have no metadata and are skipped)
    topics = {"t1": 6, "t2": 6, "t3": 2, "t4": 2, "t5": 4, "t6": 4}
    subs = [[f"t{i}" for i in range(1, 10)]] * 3
    consumer_racks = racks(3)
    plain = [
        "t1-0, t1-1, t2-0, t2-1, t3-0, t4-0, t5-0, t5-1, t6-0, t6-1",
        "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1, t5-2, t6-2",
        "t1-4, t1-5, t2-4, t2-5, t5-3, t6-3",
    ]
    verify_rack_assignment(topics, 3, null_racks(3), consumer_racks, subs, plain, -1)
    verify_rack_assignment(topics, 3, racks(3), consumer_racks, subs, plain, 0, prefer_rack_aware=True)
    rack_aware = [
        "t1-0, t1-2, t2-0, t2-2, t3-0, t4-0, t5-1, t6-1",
        "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1, t5-2, t6-2",
        "t1-4, t1-5, t2-4, t2-5, t5-0, t5-3, t6-0, t6-3",
    ]
    verify_rack_assignment(topics, 2, racks(3), consumer_racks, subs, rack_aware, 0, prefer_rack_aware=True)
    # Replicas on two of three racks already differ per partition: the same without the test hook.
    verify_rack_assignment(topics, 2, racks(3), consumer_racks, subs, rack_aware, 0)


def test_empty_client_rack_counts_as_no_rack() -> None:
    # RangeAssignor.consumerRacks drops an empty rack id; such a member matches every partition.
    cluster = kafka_cluster({"t": 4}, 1, racks(2))  # t-0, t-2 on rack a; t-1, t-3 on rack b
    empty = ConsumerGroup("g", "range", (Member("m0", "a", ("t",)), Member("m1", "", ("t",))))
    none = ConsumerGroup("g", "range", (Member("m0", "a", ("t",)), Member("m1", None, ("t",))))
    assert range_assignment(cluster, empty) == range_assignment(cluster, none)
    # m0 takes the rack-a partitions first; m1, rack-less, takes the first ones left.
    assert range_assignment(cluster, none) == {"m0": [("t", 0), ("t", 2)], "m1": [("t", 1), ("t", 3)]}


def test_rackless_member_matches_everything_in_co_partitioned_pass() -> None:
    # RangeAssignor.TopicAssignmentState.racksMatch: a member without a rack matches any partition,
    # so in assignCoPartitionedWithRackMatching m0 (no rack, first) takes p0 and p1 of both topics,
    # and m1 (rack b) then matches p3; p2 (rack a only) is left for the range fill.
    cluster = kafka_cluster({"t1": 4, "t2": 4}, 1, racks(2))  # even partitions on rack a, odd on b
    group = ConsumerGroup("g", "range", (Member("m0", None, ("t1", "t2")), Member("m1", "b", ("t1", "t2"))))
    assert range_assignment(cluster, group) == {
        "m0": [("t1", 0), ("t1", 1), ("t2", 0), ("t2", 1)],
        "m1": [("t1", 2), ("t1", 3), ("t2", 2), ("t2", 3)],
    }
    assert range_assignment(cluster, group) == kafka_reference(cluster, group)


# ---- A plain transcription of Kafka's algorithm, as the oracle -------------


def kafka_reference(cluster: Cluster, group: ConsumerGroup) -> Assignment:
    """RangeAssignor.assignPartitions, written as directly as possible (rack strings, full scans).

    Only for ASCII ids, where Python and Java string order agree.
    """
    members = sorted(
        group.members,
        key=lambda m: (0, m.group_instance_id, m.member_id) if m.group_instance_id else (1, m.member_id, ""),
    )
    rack_of = {m.member_id: (m.rack or None) for m in members}
    result: Assignment = {m.member_id: [] for m in members}

    class State:
        def __init__(self, topic: str, consumers: list[str]) -> None:
            n = len(cluster.topics[topic])
            self.topic, self.consumers = topic, consumers
            self.unassigned = list(range(n))
            self.count = dict.fromkeys(consumers, 0)
            self.per, self.extra = n // len(consumers), n % len(consumers)
            consumer_racks = {rack_of[c] for c in consumers} - {None}
            self.racks = {p: cluster.replica_racks(topic, p) for p in range(n)} if consumer_racks else {}
            union = frozenset().union(*self.racks.values())
            self.needs = bool(consumer_racks & union) and any(r != union for r in self.racks.values())

        def matches(self, c: str, p: int) -> bool:
            return rack_of[c] is None or (p in self.racks and rack_of[c] in self.racks[p])

        def max_assignable(self, c: str) -> int:
            return max(0, self.per + (1 if self.extra > 0 else 0) - self.count[c])

        def give(self, c: str, parts: list[int]) -> None:
            result[c].extend((self.topic, p) for p in parts)
            self.count[c] += len(parts)
            if self.count[c] > self.per:
                self.extra -= 1
            self.unassigned = [p for p in self.unassigned if p not in parts]

        def ranges(self, rack_match: bool) -> None:
            for c in self.consumers:
                if not self.unassigned:
                    break
                ok = [p for p in self.unassigned if not rack_match or self.matches(c, p)]
                if ok[: self.max_assignable(c)]:
                    self.give(c, ok[: self.max_assignable(c)])

    topics = sorted({t for m in members for t in m.topics if cluster.topics.get(t)})
    states = [State(t, [m.member_id for m in members if t in m.topics]) for t in topics]
    if any(s.needs for s in states):
        grouped: dict[tuple[tuple[str, ...], int], list[State]] = {}
        for s in states:
            grouped.setdefault((tuple(s.consumers), len(s.racks)), []).append(s)
        for (consumers, n), same in grouped.items():
            if len(same) == 1:
                if same[0].needs:
                    same[0].ranges(rack_match=True)
                continue
            remaining = list(consumers)
            for p in range(n):
                for c in remaining:
                    if all(s.matches(c, p) and s.max_assignable(c) > 0 for s in same):
                        for s in same:
                            s.give(c, [p])
                        if all(s.max_assignable(c) == 0 for s in same):
                            remaining.remove(c)
                        break
    for s in states:
        s.ranges(rack_match=False)
    return {m: sorted(v) for m, v in result.items()}


def plain_range(cluster: Cluster, group: ConsumerGroup) -> Assignment:
    """The pre-KIP-881 range assignment: contiguous ranges per topic, first members get the extras."""
    members = sorted(
        group.members,
        key=lambda m: (0, m.group_instance_id, m.member_id) if m.group_instance_id else (1, m.member_id, ""),
    )
    out: Assignment = {m.member_id: [] for m in members}
    for t in sorted({t for m in members for t in m.topics}):
        subs = [m.member_id for m in members if t in m.topics]
        n = len(cluster.topics[t])
        start = 0
        for i, mid in enumerate(subs):
            size = n // len(subs) + (1 if i < n % len(subs) else 0)
            out[mid].extend((t, p) for p in range(start, start + size))
            start += size
    return {m: sorted(v) for m, v in out.items()}


def uses_racks(cluster: Cluster, group: ConsumerGroup) -> bool:
    """Whether Kafka's ``useRackAwareAssignment`` holds for some subscribed topic."""
    for t in {t for m in group.members for t in m.topics}:
        member_racks = {m.rack for m in group.members if t in m.topics and m.rack}
        part_racks = [cluster.replica_racks(t, p) for p in range(len(cluster.topics[t]))]
        union = frozenset().union(*part_racks)
        if member_racks & union and any(r != union for r in part_racks):
            return True
    return False


# ---- Properties ---------------------------------------------------------------


@st.composite
def instances(
    draw: st.DrawFn, /, max_members: int = 6, max_topics: int = 3, max_partitions: int = 8
) -> tuple[Cluster, ConsumerGroup]:
    """A cluster and a range group; some members static, with instance ids in another order."""
    cluster = draw(clusters(max_topics=max_topics, max_partitions=max_partitions))
    group = draw(consumer_groups(cluster, "range", max_members=max_members))
    order = draw(st.permutations(range(len(group.members))))
    members = tuple(
        replace(m, group_instance_id=f"i-{order[i]:02d}") if draw(st.booleans()) else m
        for i, m in enumerate(group.members)
    )
    return cluster, replace(group, members=members)


@settings(max_examples=200, deadline=None)
@given(instances())
def test_valid_balanced_and_equal_to_kafka_reference(inst: tuple[Cluster, ConsumerGroup]) -> None:
    cluster, group = inst
    plan = assign(cluster, group)
    assert_valid(cluster, group, plan)
    assert_range_balanced(group, plan)
    assert plan.revoked == {}
    assert plan.assignment == kafka_reference(cluster, group)


@settings(max_examples=100, deadline=None)
@given(instances(max_members=12, max_topics=6, max_partitions=12), st.randoms(use_true_random=False))
def test_deterministic_and_independent_of_member_order_and_owned(
    inst: tuple[Cluster, ConsumerGroup], rnd: random.Random
) -> None:
    cluster, group = inst
    first = assign(cluster, group).assignment
    assert assign(cluster, group).assignment == first
    shuffled = list(group.members)
    rnd.shuffle(shuffled)
    assert assign(cluster, replace(group, members=tuple(shuffled))).assignment == first
    unowned = tuple(replace(m, owned=(), generation=-1) for m in group.members)
    assert assign(cluster, replace(group, members=unowned)).assignment == first
    assert first == kafka_reference(cluster, group)


@settings(max_examples=150, deadline=None)
@given(instances(max_members=8, max_topics=4, max_partitions=10))
def test_without_rack_awareness_it_is_plain_range(inst: tuple[Cluster, ConsumerGroup]) -> None:
    cluster, group = inst
    if not uses_racks(cluster, group):
        assert assign(cluster, group).assignment == plain_range(cluster, group)
    # Members without racks, or brokers without racks, always switch rack awareness off.
    no_member_racks = tuple(replace(m, rack=None) for m in group.members)
    g2 = replace(group, members=no_member_racks)
    assert assign(cluster, g2).assignment == plain_range(cluster, g2)
    rackless = Cluster(broker_racks=dict.fromkeys(cluster.broker_racks), topics=cluster.topics)
    assert assign(rackless, group).assignment == plain_range(rackless, group)


@settings(max_examples=150, deadline=None)
@given(instances(max_members=8, max_topics=4, max_partitions=10))
def test_every_partition_on_every_rack_gives_plain_range(inst: tuple[Cluster, ConsumerGroup]) -> None:
    # Kafka's claim behind verifyNonRackAwareAssignment: with replicas on all racks, even the
    # rack passes (preferRackAwareLogic) reproduce plain ranges, as long as every member rack
    # holds brokers (a member on a rack without brokers matches nothing and waits for leftovers).
    cluster, group = inst
    all_brokers = tuple(sorted(cluster.broker_racks))
    racked = [b for b in all_brokers if cluster.broker_racks[b] is not None]
    full = Cluster(
        broker_racks=cluster.broker_racks,
        topics={t: tuple(all_brokers for _ in parts) for t, parts in cluster.topics.items()},
    )
    known = tuple(replace(m, rack=m.rack if m.rack in full.racks else None) for m in group.members)
    g2 = replace(group, members=known)
    assert assign(full, g2).assignment == plain_range(full, g2)
    if racked:
        assert range_assignment(full, g2, prefer_rack_aware=True) == plain_range(full, g2)


@settings(max_examples=150, deadline=None)
@given(instances(max_members=6, max_topics=5, max_partitions=6))
def test_co_partitioned_topics_stay_co_partitioned(inst: tuple[Cluster, ConsumerGroup]) -> None:
    # Topics with the same subscribers and partition count: partition p of each goes to one member.
    cluster, group = inst
    owner = {tp: mid for mid, parts in assign(cluster, group).assignment.items() for tp in parts}
    topics = sorted({t for m in group.members for t in m.topics})
    subscribers = {t: frozenset(m.member_id for m in group.members if t in m.topics) for t in topics}
    for a in topics:
        for b in topics:
            if (
                a < b
                and subscribers[a] == subscribers[b]
                and len(cluster.topics[a]) == len(cluster.topics[b])
            ):
                for p in range(len(cluster.topics[a])):
                    assert owner[(a, p)] == owner[(b, p)], (a, b, p)


def test_java_string_order_for_member_ids() -> None:
    # Java compares UTF-16 code units: U+FF5E sorts after U+1F600 (a surrogate pair, 0xD83D...).
    cluster = Cluster(broker_racks={1: None}, topics={"t": ((1,), (1,))})
    group = ConsumerGroup("g", "range", (Member("\U0001f600", None, ("t",)), Member("\uff5e", None, ("t",))))
    assert range_assignment(cluster, group) == {"\U0001f600": [("t", 0)], "\uff5e": [("t", 1)]}


_IDS = st.text(st.sampled_from("aZ09-_\u00e9\uff5e\U0001f600"), max_size=4)


@given(members=st.lists(st.tuples(_IDS, st.none() | _IDS), max_size=8, unique_by=lambda m: m[0]))
def test_kafkas_member_order_without_encoding_ascii_ids_is_java_order(
    members: list[tuple[str, str | None]],
) -> None:
    """``kafka_member_order`` sorts ASCII-only groups by ``str`` (no UTF-16 encoding) and any other group
    by Java's UTF-16 code units: both give Java's order, which the encoded key defines (static members
    by instance id first, ties by member id)."""
    group = [Member(mid, gid, ("t",)) for mid, gid in members]
    assert kafka_member_order(group) == sorted(group, key=_member_key)


@settings(max_examples=300, deadline=None)
@given(n_parts=st.integers(0, 80), n_consumers=st.integers(1, 30))
def test_plain_ranges_equal_kafkas_fill_on_a_fresh_topic(n_parts: int, n_consumers: int) -> None:
    """Issue 29, item 4: the slices of a topic no rack pass touched are exactly what the per-member
    fill (Kafka's ``assignRanges``) gives, one non-empty slice per member that gets partitions."""
    consumers = list(range(0, 2 * n_consumers, 2))  # member positions need not be contiguous
    fast, slow = (_TopicState("t", [1] * n_parts, consumers) for _ in range(2))
    slices = plain_ranges(fast)
    fill_by_calls(slow)
    assert [c for c, first, end in slices for _ in range(first, end)] == slow.owner
    assert all(end > first for _, first, end in slices)


def take_first(
    state: _TopicState, candidates: Sequence[int], cursor: int, limit: int
) -> tuple[list[int], int]:
    """The first ``limit`` unassigned partitions of ``candidates`` from ``cursor``, and the new cursor
    (everything before a cursor is assigned: partitions are never unassigned)."""
    out: list[int] = []
    i, end = cursor, len(candidates)
    while i < end and len(out) < limit:
        if state.owner[candidates[i]] < 0:
            out.append(candidates[i])
        i += 1
    while i < end and state.owner[candidates[i]] >= 0:
        i += 1
    return out, i


def rack_pass_by_calls(state: _TopicState, bits: Sequence[int], has_rack: Sequence[bool]) -> None:
    """Kafka's ``assignRanges`` with ``racksMatch`` step by step through the state's bookkeeping calls: the
    oracle of the inlined :func:`_rack_pass_py` (its form before issue 29)."""
    everything = range(state.n)
    all_cursor = 0
    by_bit: dict[int, tuple[list[int], int]] = {}
    for c in state.consumers:
        if state.assigned == state.n or (state.per_member == 0 and state.extra == 0):
            break
        limit = state.max_assignable(c)
        if limit == 0:
            continue
        if not has_rack[c]:
            parts, all_cursor = take_first(state, everything, all_cursor, limit)
        else:
            if bits[c] == 0:
                continue
            entry = by_bit.get(bits[c])
            if entry is None:
                entry = ([p for p in everything if state.masks[p] & bits[c]], 0)
            parts, cursor = take_first(state, entry[0], entry[1], limit)
            by_bit[bits[c]] = (entry[0], cursor)
        if parts:
            state.give(c, parts)


def fill_by_calls(state: _TopicState) -> None:
    """Kafka's plain ``assignRanges`` through the bookkeeping calls: the oracle of the inlined :func:`_fill`."""
    cursor = 0
    for c in state.consumers:
        if state.assigned == state.n:
            break
        limit = state.max_assignable(c)
        if limit:
            parts, cursor = take_first(state, range(state.n), cursor, limit)
            if parts:
                state.give(c, parts)


@settings(max_examples=400, deadline=None)
@given(
    masks=st.lists(st.integers(0, 7), max_size=60),
    members=st.lists(st.tuples(st.booleans(), st.sampled_from([0, 1, 2, 4, 3])), min_size=1, max_size=25),
)
def test_the_rack_pass_and_the_fill_equal_the_passes_through_the_bookkeeping_calls(
    masks: list[int], members: list[tuple[bool, int]]
) -> None:
    """Issue 29: the rack pass and the fill inlined (state in locals) take exactly the partitions, counts and quotas
    that the passes through ``max_assignable``, ``take_first`` and ``give`` take: members with and
    without racks, racks holding no broker (bit 0), partitions on no rack, more members than partitions."""
    has_rack = [r for r, _ in members]
    bits = [b if r else 0 for r, b in members]
    consumers = list(range(len(members)))
    fast, slow = (_TopicState("t", masks, consumers) for _ in range(2))
    _rack_pass_py(fast, bits, has_rack)
    rack_pass_by_calls(slow, bits, has_rack)
    assert (fast.owner, fast.counts, fast.extra, fast.assigned) == (
        slow.owner,
        slow.counts,
        slow.extra,
        slow.assigned,
    )
    _fill(fast)  # then the plain fill over what the pass left, as range_assignment runs it
    fill_by_calls(slow)
    assert (fast.owner, fast.counts, fast.extra) == (slow.owner, slow.counts, slow.extra)
    assert fast.assigned == slow.assigned == len(masks) and -1 not in fast.owner


def state_of(state: _TopicState) -> tuple[list[int], dict[int, int], int, int]:
    return state.owner, state.counts, state.extra, state.assigned


@settings(max_examples=500, deadline=None)
@given(
    masks=st.lists(st.integers(0, 15), max_size=80),
    members=st.lists(st.tuples(st.booleans(), st.sampled_from([0, 1, 2, 4, 8, 3])), min_size=1, max_size=30),
    order=st.randoms(use_true_random=False),
    as_tuple=st.booleans(),
)
def test_the_compiled_passes_are_the_python_ones(
    core: Core, masks: list[int], members: list[tuple[bool, int]], order: random.Random, as_tuple: bool
) -> None:
    """Issue 29: ``_flowcore.rack_and_fill`` takes exactly the partitions, counts and quotas the Python
    rack pass and fill take on a fresh topic: members with and without racks, racks holding no broker, partitions on no
    rack, more members than partitions, subscribers a subset of the members in any order."""
    has_rack = [r for r, _ in members]
    bits = [b if r else 0 for r, b in members]
    keys = [b if r else -1 for b, r in zip(bits, has_rack, strict=True)]
    consumers = [c for c in range(len(members)) if order.random() < 0.8] or [0]
    order.shuffle(consumers)
    topic: Sequence[int] = tuple(masks) if as_tuple else masks
    fast, slow = (_TopicState("t", topic, consumers) for _ in range(2))
    got = core.rack_and_fill(topic, consumers, keys, fast.per_member, fast.extra)
    assert got is not None
    _rack_pass_py(slow, bits, has_rack)
    _fill(slow)
    owner, counts, extra, assigned = got
    assert (owner, dict(zip(consumers, counts, strict=True)), extra, assigned) == state_of(slow)
    _rack_pass_and_fill(fast, bits, has_rack, keys, core)  # the dispatcher writes the same state back
    assert state_of(fast) == state_of(slow)


def test_the_compiled_passes_hand_back_what_they_cannot_take(core: Core) -> None:
    """None, and the Python answers: a mask past 62 bits (a cluster with that many racks), a consumer
    twice or outside the keys, a key not a plain int, masks neither list nor tuple, a negative quota."""
    assert core.rack_and_fill([1, 1 << 62], [0], [1], 1, 0) is None
    assert core.rack_and_fill([1, 2], [0, 0], [1], 1, 0) is None
    assert core.rack_and_fill([1, 2], [0, 1], [1], 1, 0) is None
    assert core.rack_and_fill([1, 2], [0], [True], 2, 0) is None  # a bool is not a plain int
    assert core.rack_and_fill(range(2), [0], [1], 2, 0) is None
    assert core.rack_and_fill([1, 2], [0], [1], -1, 0) is None
    wide = _TopicState("t", [1 << 62, 1, 1 << 62], [0, 1])
    reference = _TopicState("t", [1 << 62, 1, 1 << 62], [0, 1])
    _rack_pass_and_fill(wide, [1 << 62, 1], [True, True], [1 << 62, 1], core)
    _rack_pass_py(reference, [1 << 62, 1], [True, True])
    _fill(reference)
    assert state_of(wide) == state_of(reference) == ([0, 1, 0], {0: 2, 1: 1}, 0, 3)


def co_partitioned_pass_by_calls(
    states: list[_TopicState], bits: Sequence[int], has_rack: Sequence[bool]
) -> None:
    """Kafka's ``assignCoPartitionedWithRackMatching`` through every topic's bookkeeping calls: the oracle of
    the inlined :func:`_co_partitioned_pass` (its form before issue 29)."""
    first = states[0]
    queues: dict[int, list[int]] = {}
    for c in first.consumers:
        if not has_rack[c]:
            queues.setdefault(0, []).append(c)
        elif bits[c]:
            queues.setdefault(bits[c], []).append(c)
    heads = dict.fromkeys(queues, 0)
    rank = {c: i for i, c in enumerate(first.consumers)}

    def head(key: int) -> int:
        q, i = queues[key], heads[key]
        while i < len(q) and not all(s.max_assignable(q[i]) > 0 for s in states):
            i += 1
        heads[key] = i
        return q[i] if i < len(q) else -1

    for p in range(first.n):
        common = -1
        for s in states:
            common &= s.masks[p]
        best = -1
        for key in queues:
            if key and not (key & common):
                continue
            c = head(key)
            if c >= 0 and (best < 0 or rank[c] < rank[best]):
                best = c
        if best >= 0:
            for s in states:
                s.give(best, [p])


@settings(max_examples=400, deadline=None)
@given(
    n_parts=st.integers(0, 40),
    n_topics=st.integers(2, 4),
    data=st.data(),
    members=st.lists(st.tuples(st.booleans(), st.sampled_from([0, 1, 2, 4, 8, 3])), min_size=1, max_size=25),
    order=st.randoms(use_true_random=False),
)
def test_the_co_partitioned_pass_equals_the_pass_through_the_bookkeeping_calls(
    n_parts: int,
    n_topics: int,
    data: st.DataObject,
    members: list[tuple[bool, int]],
    order: random.Random,
) -> None:
    """Issue 29: the co-partitioned rack pass with one set of counts for all its topics (lockstep) takes exactly
    the partitions, counts and quotas of the pass through every topic's ``max_assignable`` and ``give``, then
    the fill the same: members with and without racks, racks holding no broker, partitions on no rack, more
    members than partitions, subscribers a subset of the members in member order."""
    masks = [
        data.draw(st.lists(st.integers(0, 15), min_size=n_parts, max_size=n_parts)) for _ in range(n_topics)
    ]
    has_rack = [r for r, _ in members]
    bits = [b if r else 0 for r, b in members]
    consumers = [c for c in range(len(members)) if order.random() < 0.8] or [0]
    fast = [_TopicState(f"t{i}", m, consumers) for i, m in enumerate(masks)]
    slow = [_TopicState(f"t{i}", m, consumers) for i, m in enumerate(masks)]
    _co_partitioned_pass(fast, bits, has_rack)
    co_partitioned_pass_by_calls(slow, bits, has_rack)
    assert [state_of(s) for s in fast] == [state_of(s) for s in slow]
    for f, s in zip(fast, slow, strict=True):
        _fill(f)
        fill_by_calls(s)
        assert state_of(f) == state_of(s)
    # each topic holds its own lists: the fill of one never writes another's
    assert len({id(s.owner) for s in fast}) == len({id(s.counts) for s in fast}) == n_topics
