"""cooperative-sticky against Kafka's real CooperativeStickyAssignor on the issue's skewed-rack scenario.

One member of a group whose members sit 60/30/10% over three racks leaves;
every partition has one replica, spread evenly over the racks, so many members
must read across racks whatever the assignor does.  Kafka (run through
:mod:`tests.kafka_oracle`) revokes every owned partition whose rack does not
match and deals them again; rackplan keeps them unless moving lowers the final
cross-rack count.  Both run cooperative rounds until one withholds nothing.
The random-instance comparison lives in :mod:`tests.assignor.test_vs_kafka_java`.
"""

from __future__ import annotations

import pytest

from rackplan.assignor.model import Cluster, ConsumerGroup, Member
from rackplan.assignor.record import replace
from tests.assignor.test_vs_kafka_java import kafka, ours, run_rounds, settle_start
from tests.invariants import assert_balanced
from tests.kafka_oracle import KafkaOracle, session_oracle

RACKS = ("az-a", "az-b", "az-c")


@pytest.fixture(scope="session")
def kafka_oracle() -> KafkaOracle:
    return session_oracle()


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


def without(group: ConsumerGroup, member_id: str) -> ConsumerGroup:
    return replace(group, members=tuple(m for m in group.members if m.member_id != member_id))


@pytest.mark.parametrize("leaver", ["member-0000", "member-0006", "member-0009"])
@pytest.mark.parametrize("prior", ["ours", "kafka"])
def test_one_member_of_a_60_30_10_group_leaves(kafka_oracle: KafkaOracle, leaver: str, prior: str) -> None:
    """100 members, 100 single-replica partitions: at least 26 members must read across racks."""
    cluster, group = skewed(100, 10, 10)
    start = settle_start(ours if prior == "ours" else kafka(kafka_oracle), cluster, group)
    left = without(start, leaver)
    mine = run_rounds(ours, cluster, left)
    theirs = run_rounds(kafka(kafka_oracle), cluster, left)
    assert mine is not None and theirs is not None
    assert_balanced(mine.group, mine.plan)
    assert mine.moved <= 1
    assert mine.cross <= theirs.cross
    assert mine.moved <= theirs.moved
    if prior == "ours":
        # A prior that is not its own deal: Kafka re-deals every owned cross-rack partition.
        assert theirs.moved >= 20
