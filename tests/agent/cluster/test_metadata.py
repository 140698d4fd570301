"""Metadata polling against a fake AdminClient: complete snapshots or errors, retries with jitter."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from rackplan.agent.cluster.metadata import (
    NO_LEADER,
    MetadataError,
    Snapshot,
    TopicState,
    backoff_delays,
    fetch_snapshot,
    known_racks,
    poll_snapshot,
)
from rackplan.agent.settings.sections import MetadataSettings
from rackplan.agent.testing import FakeAdmin, Node


def admin() -> FakeAdmin:
    return FakeAdmin(
        nodes=[Node(1, "a"), Node(2, "b"), Node(3, "")],
        topics={"orders": [[1, 2], [2, 3], []], "__consumer_offsets": [[1]], "x": [[2]]},
    )


def test_snapshot_is_complete_and_sorted() -> None:
    s = fetch_snapshot(admin(), MetadataSettings(), now=lambda: 42.0)
    assert s.brokers == {1: "a", 2: "b", 3: None}  # an empty rack is no rack
    assert sorted(s.topics) == ["orders", "x"]  # internal topics excluded
    assert s.topics["orders"] == TopicState(((1, 2), (2, 3), ()), (1, 2, NO_LEADER))
    assert s.taken_at == 42.0
    assert s.partition_count() == 4


def test_racks_are_asked_once_per_new_broker() -> None:
    """DescribeCluster only for broker ids the cache lacks: not per poll."""
    a = admin()
    cache: dict[int, str | None] = {}
    first = fetch_snapshot(a, MetadataSettings(), rack_cache=cache)
    again = fetch_snapshot(a, MetadataSettings(), rack_cache=cache, exclude=frozenset({"x"}))
    assert a.cluster_described == 1 and first.brokers == again.brokers == {1: "a", 2: "b", 3: None}
    assert "x" not in again.topics
    a.nodes.append(Node(4, "c"))
    assert fetch_snapshot(a, MetadataSettings(), rack_cache=cache).brokers[4] == "c"
    assert a.cluster_described == 2


def test_a_broker_back_from_a_restart_is_asked_its_rack_again() -> None:
    """broker.rack changes only with a restart: a broker that left the metadata and returns may bring a new one."""
    a = admin()
    cache: dict[int, str | None] = {}
    fetch_snapshot(a, MetadataSettings(), rack_cache=cache)
    a.nodes = [n for n in a.nodes if n.id != 2]  # broker 2 down
    assert 2 not in fetch_snapshot(a, MetadataSettings(), rack_cache=cache).brokers
    a.nodes.append(Node(2, "c"))  # back, in another rack
    assert fetch_snapshot(a, MetadataSettings(), rack_cache=cache).brokers[2] == "c"
    assert a.cluster_described == 2  # the poll without broker 2 asked nothing: every live rack was known


def test_a_topic_deleted_meanwhile_is_skipped() -> None:
    a = admin()
    a.errors["gone"] = KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
    assert "gone" not in fetch_snapshot(a, MetadataSettings()).topics


def test_any_other_topic_error_fails_the_whole_poll() -> None:
    a = admin()
    a.errors["bad"] = KafkaException(KafkaError(KafkaError.REQUEST_TIMED_OUT))
    with pytest.raises(MetadataError, match="bad"):
        fetch_snapshot(a, MetadataSettings())


def test_poll_retries_with_backoff_then_succeeds() -> None:
    calls: list[int] = []
    slept: list[float] = []
    good = Snapshot(brokers={1: "a"}, topics={})

    def fetch(_admin: Any, _s: MetadataSettings, _exclude: frozenset[str]) -> Snapshot:
        calls.append(1)
        if len(calls) < 3:
            raise MetadataError("down")
        return good

    s = MetadataSettings(max_attempts=4, backoff_initial_s=1, backoff_max_s=10)
    assert poll_snapshot(admin(), s, sleep=slept.append, rng=lambda: 1.0, fetch=fetch) is good
    assert slept == [1.0, 2.0]


def test_poll_gives_up_after_max_attempts() -> None:
    slept: list[float] = []

    def fetch(_admin: Any, _s: MetadataSettings, _exclude: frozenset[str]) -> Snapshot:
        raise MetadataError("down")

    with pytest.raises(MetadataError):
        poll_snapshot(admin(), MetadataSettings(max_attempts=3), sleep=slept.append, fetch=fetch)
    assert len(slept) == 2


def test_backoff_is_capped_and_jittered() -> None:
    s = MetadataSettings(max_attempts=8, backoff_initial_s=0.5, backoff_max_s=3)
    high = backoff_delays(s, rng=lambda: 1.0)
    low = backoff_delays(s, rng=lambda: 0.0)
    assert high == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0, 3.0]
    assert low == [d / 2 for d in high]


def test_known_racks_remember_last_rack() -> None:
    k = known_racks({}, Snapshot(brokers={1: "a", 2: None}, topics={}))
    assert k == {1: "a"}
    k = known_racks(k, Snapshot(brokers={1: None, 2: "b"}, topics={}))
    assert k == {1: "a", 2: "b"}


def test_while_describe_cluster_fails_new_brokers_have_no_rack_yet() -> None:
    """DescribeCluster waits for a controller that may be the broker just killed: a poll still
    succeeds from the Metadata request, the unknown racks are None (the loop keeps last known ones)."""

    class NoController(FakeAdmin):
        def describe_cluster(self, **kw: Any) -> Future[Any]:
            f: Future[Any] = Future()
            f.set_exception(
                KafkaException(KafkaError(KafkaError._TIMED_OUT, "Timed out waiting for controller"))
            )
            return f

    a = NoController(nodes=[Node(1, "a"), Node(2, "b")], topics={"orders": [[1, 3], [2, 3]]})
    s = fetch_snapshot(a, MetadataSettings(), rack_cache={1: "a"})
    assert s.brokers == {1: "a", 2: None}
    assert s.resolve_racks({2: "b", 3: "c"}) == {1: "a", 2: "b", 3: "c"}
    assert s.topics["orders"].replicas == ((1, 3), (2, 3))


def test_replicas_out_of_sync_are_marked() -> None:
    a = admin()
    md = a.list_topics(timeout=1.0)
    md.topics["orders"].partitions[0].isrs = [1]

    class Fixed(FakeAdmin):
        def list_topics(self, topic: str | None = None, timeout: float = 0) -> Any:
            return md

    s = fetch_snapshot(Fixed(topics=a.topics, nodes=a.nodes), MetadataSettings())
    assert s.topics["orders"].syncing == frozenset({0})
