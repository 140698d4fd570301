"""Metadata polling against a fake AdminClient: complete snapshots or errors, retries with jitter."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from agent.metadata import (
    NO_LEADER,
    MetadataError,
    Snapshot,
    TopicState,
    backoff_delays,
    fetch_snapshot,
    known_racks,
    poll_snapshot,
)
from agent.settings import MetadataSettings
from tests.fake_admin import Desc, Node, Part, done


def failed(e: BaseException) -> Future[Any]:
    f: Future[Any] = Future()
    f.set_exception(e)
    return f


@dataclass
class FakeAdmin:
    nodes: list[Node]
    topics: dict[str, list[list[int]]]
    errors: dict[str, BaseException] = field(default_factory=dict)
    batches: list[list[str]] = field(default_factory=list)

    def describe_cluster(self, **kw: Any) -> Future[Any]:
        assert kw["include_authorized_operations"] is False
        return done(type("C", (), {"nodes": self.nodes})())

    def list_topics(self, timeout: float) -> Any:
        return type("M", (), {"topics": {t: None for t in [*self.topics, *self.errors]}})()

    def describe_topics(self, coll: Any, **kw: Any) -> dict[str, Future[Any]]:
        names = list(coll.topic_names)
        self.batches.append(names)
        out: dict[str, Future[Any]] = {}
        for n in names:
            if n in self.errors:
                out[n] = failed(self.errors[n])
            else:
                parts = [
                    Part(i, Node(r[0]) if r else None, [Node(b) for b in r])
                    for i, r in reversed(list(enumerate(self.topics[n])))
                ]
                out[n] = done(Desc(parts))
        return out


def admin() -> FakeAdmin:
    return FakeAdmin(
        nodes=[Node(1, "a"), Node(2, "b"), Node(3, "")],
        topics={"orders": [[1, 2], [2, 3], []], "__consumer_offsets": [[1]], "x": [[2]]},
    )


def test_snapshot_is_complete_and_sorted() -> None:
    s = fetch_snapshot(admin(), MetadataSettings(describe_batch_size=1), now=lambda: 42.0)
    assert s.brokers == {1: "a", 2: "b", 3: None}  # an empty rack is no rack
    assert sorted(s.topics) == ["orders", "x"]  # internal topics excluded
    assert s.topics["orders"] == TopicState(((1, 2), (2, 3), ()), (1, 2, NO_LEADER))
    assert s.taken_at == 42.0
    assert s.partition_count() == 4


def test_topics_are_described_in_batches() -> None:
    a = admin()
    a.topics.update({f"t{i}": [[1]] for i in range(5)})
    s = fetch_snapshot(a, MetadataSettings(describe_batch_size=3), exclude=frozenset({"x"}))
    assert [len(b) for b in a.batches] == [3, 3]
    assert "x" not in s.topics and len(s.topics) == 6


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
    assert poll_snapshot(None, s, sleep=slept.append, rng=lambda: 1.0, fetch=fetch) is good
    assert slept == [1.0, 2.0]


def test_poll_gives_up_after_max_attempts() -> None:
    slept: list[float] = []

    def fetch(_admin: Any, _s: MetadataSettings, _exclude: frozenset[str]) -> Snapshot:
        raise MetadataError("down")

    with pytest.raises(MetadataError):
        poll_snapshot(None, MetadataSettings(max_attempts=3), sleep=slept.append, fetch=fetch)
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


def test_racks_come_from_topic_descriptions_without_describe_cluster() -> None:
    """DescribeCluster goes to the last known controller and times out while it is down: when every
    live broker holds a replica, the topic descriptions' nodes give every rack and it is not asked."""

    @dataclass
    class LiveNode:
        id: int
        rack: str | None = None
        host: str = "127.0.0.1"

    class NoController(FakeAdmin):
        def describe_cluster(self, **kw: Any) -> Future[Any]:
            raise AssertionError("not asked")

        def list_topics(self, timeout: float) -> Any:
            m = super().list_topics(timeout)
            m.brokers = {1: None, 2: None}  # broker 3 is down: live brokers only
            return m

        def describe_topics(self, coll: Any, **kw: Any) -> dict[str, Future[Any]]:
            def node(b: int) -> Any:
                return LiveNode(b, {1: "a", 2: "b"}[b]) if b in (1, 2) else Node(b)  # dead: no host

            return {
                n: done(
                    Desc([Part(i, node(r[0]), [node(b) for b in r]) for i, r in enumerate(self.topics[n])])
                )
                for n in coll.topic_names
            }

    a = NoController(nodes=[], topics={"orders": [[1, 3], [2, 3]]})
    s = fetch_snapshot(a, MetadataSettings())
    assert s.brokers == {1: "a", 2: "b"}
    assert s.resolve_racks({3: "c"}) == {1: "a", 2: "b", 3: "c"}  # the dead one keeps its known rack
    assert s.topics["orders"].replicas == ((1, 3), (2, 3))
