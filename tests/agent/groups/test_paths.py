"""Which path assigns a group (issue 27 §4): the description's type and assignor, followers, a Streams app's
``group_protocol``; and a KIP-848 group that empties stays the broker's."""

from __future__ import annotations

from confluent_kafka import ConsumerGroupState, ConsumerGroupType, Node, TopicPartition
from confluent_kafka.admin._group import ConsumerGroupDescription, MemberAssignment, MemberDescription

from rackplan.agent.groups.membership import RealGroup, RealMember, real_group
from rackplan.agent.groups.paths import (
    CLASSIC_FOLLOWERS,
    KIP848_BROKER,
    STREAMS_BROKER,
    UNKNOWN,
    GroupPath,
    classify,
    publishes,
)

ONE = (RealMember("m-1", "c-1", "10.0.0.1", None, (("t", 0),)),)


def test_a_described_consumer_group_is_on_the_path_its_type_says_with_its_assignor() -> None:
    kip848 = RealGroup("g", "STABLE", ONE, "CONSUMER", "uniform")
    classic = RealGroup("g", "STABLE", ONE, "CLASSIC", "range")
    old_broker = RealGroup("g", "STABLE", ONE)  # a broker too old to say the type: the classic protocol
    assert classify("consumer", kip848, followers=False, group_protocol=None) == GroupPath(
        KIP848_BROKER, "uniform"
    )
    assert classify("consumer", classic, followers=False, group_protocol=None) == GroupPath(
        CLASSIC_FOLLOWERS, "range"
    )
    assert classify("consumer", old_broker, followers=False, group_protocol=None) == GroupPath(
        CLASSIC_FOLLOWERS
    )


def test_a_group_without_live_members_is_unknown_unless_plan_followers_are_registered() -> None:
    empty = RealGroup("g", "EMPTY", (), "CONSUMER", "uniform")
    assert classify("consumer", empty, followers=False, group_protocol=None) == GroupPath(UNKNOWN)
    assert classify("consumer", None, followers=False, group_protocol=None) == GroupPath(UNKNOWN)
    # Followers read by assign(): the brokers show no member, the plans are what they follow.
    assert classify("consumer", empty, followers=True, group_protocol=None) == GroupPath(CLASSIC_FOLLOWERS)


def test_a_streams_app_is_on_the_path_its_settings_say() -> None:
    # librdkafka 2.16 cannot describe a Streams group: the settings entry's group_protocol decides.
    assert classify("streams", None, followers=False, group_protocol="streams") == GroupPath(STREAMS_BROKER)
    assert classify("streams", None, followers=True, group_protocol=None) == GroupPath(CLASSIC_FOLLOWERS)
    assert classify("streams", None, followers=False, group_protocol="classic") == GroupPath(
        CLASSIC_FOLLOWERS
    )


def test_plans_are_published_except_on_the_brokers_paths_and_an_emptied_broker_group_stays_the_brokers() -> (
    None
):
    kip848, streams = GroupPath(KIP848_BROKER, "uniform"), GroupPath(STREAMS_BROKER)
    assert not publishes(kip848, kip848) and not publishes(streams, streams)
    assert publishes(GroupPath(CLASSIC_FOLLOWERS), None)
    assert publishes(GroupPath(UNKNOWN), None)  # never seen with members: a group about to start
    assert not publishes(GroupPath(UNKNOWN), kip848)  # its members left for a while
    assert publishes(GroupPath(CLASSIC_FOLLOWERS, "range"), kip848)  # rolled back to the classic protocol
    # RackplanServerAssignor reads the plan topic: a KIP-848 group on it is fed plans, even while empty.
    rackplan = GroupPath(KIP848_BROKER, "rackplan")
    assert publishes(rackplan, rackplan) and publishes(GroupPath(UNKNOWN), rackplan)


def test_the_type_and_assignor_are_read_from_confluent_kafkas_description() -> None:
    tp = TopicPartition("t", 3)
    member = MemberDescription("m-1", "c-1", "/10.0.0.9", MemberAssignment([tp]))
    node = Node(1, "localhost", 9092)
    desc = ConsumerGroupDescription(
        "g", False, [member], "uniform", ConsumerGroupState.STABLE, node, type=ConsumerGroupType.CONSUMER
    )
    got = real_group(desc)
    assert (got.type, got.assignor) == ("CONSUMER", "uniform")
    assert got.members[0].assignment == (("t", 3),)
    classic = ConsumerGroupDescription(
        "g", False, [member], "range", ConsumerGroupState.STABLE, node, type=ConsumerGroupType.CLASSIC
    )
    assert (real_group(classic).type, real_group(classic).assignor) == ("CLASSIC", "range")
