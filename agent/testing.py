"""The one set of stand-ins for the agent's Kafka seams (:mod:`rackplan.agent.core.ports`), for tests and benchmarks.

They answer like confluent-kafka's AdminClient and like
:class:`rackplan.agent.kafka.publisher.Publisher`, from data given beforehand, so the
agent's real cycle runs without a broker: the unit tests (``tests/``) and the
benchmarks (``bench/``) share these, and nothing else stands in for Kafka (the
plan follower's clients and the control tails: :mod:`rackplan.agent.testing_clients`).
Shipped in the package (not under ``tests/``) so that a benchmark never imports
a test module.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from .kafka.exceptions import PublishError

#: broker id -> rack of the fake cluster when a test names none
RACKS: Mapping[int, str | None] = {1: "az-a", 2: "az-b", 3: "az-c"}


def done(v: Any) -> Future[Any]:
    """A future that already holds ``v``, as the AdminClient's calls return."""
    f: Future[Any] = Future()
    f.set_result(v)
    return f


def failed(e: BaseException) -> Future[Any]:
    """A future that already failed with ``e``."""
    f: Future[Any] = Future()
    f.set_exception(e)
    return f


def kafka_error(code: int) -> Future[Any]:
    """A future failed with confluent-kafka's ``KafkaException`` of ``code``."""
    return failed(KafkaException(KafkaError(code)))


# ---- what the AdminClient describes --------------------------------------------------------------


@dataclass
class Node:
    id: int
    rack: str | None = None


@dataclass
class PartitionMeta:
    """confluent-kafka's PartitionMetadata: what a Metadata request says of one partition."""

    id: int
    leader: int
    replicas: list[int]
    isrs: list[int]
    error: Any = None


@dataclass
class TopicMeta:
    partitions: dict[int, PartitionMeta]
    error: Any = None


@dataclass
class ClusterMeta:
    """confluent-kafka's ClusterMetadata, as ``list_topics`` returns it."""

    topics: dict[str, TopicMeta]
    brokers: dict[int, Any]


def cluster_metadata(
    topics: Mapping[str, Sequence[Sequence[int]]], brokers: Any, errors: Mapping[str, Any] | None = None
) -> ClusterMeta:
    """Metadata of ``topics`` (replica lists, leader first, all in sync) with ``brokers`` live."""
    out = {
        t: TopicMeta({i: PartitionMeta(i, r[0] if r else -1, list(r), list(r)) for i, r in enumerate(reps)})
        for t, reps in topics.items()
    }
    for t, err in (errors or {}).items():
        out[t] = TopicMeta({}, err)
    return ClusterMeta(out, dict.fromkeys(brokers))


@dataclass
class TP:
    topic: str
    partition: int


@dataclass
class MemberAssignment:
    topic_partitions: list[TP]


@dataclass
class MemberDesc:
    member_id: str
    client_id: str
    host: str
    assignment: MemberAssignment
    group_instance_id: str | None = None


@dataclass
class GroupDesc:
    group_id: str
    members: list[MemberDesc]
    state: Any = "STABLE"


# ---- the clients ----------------------------------------------------------------------------------


@dataclass
class FakeAdmin:
    """An AdminClient over ``topics``: name -> replica lists (leader first), or ready :class:`TopicMeta`.

    ``nodes``: the brokers and their racks (default :data:`RACKS`);
    ``errors``: topic -> the error its metadata carries; ``groups``: group id ->
    its description (or a future) for DescribeGroups, None: the brokers do not
    support it (a group not in it is DEAD); ``down``: every call fails as when
    no broker answers.  ``cluster_described`` and ``groups_described`` count
    what was asked.
    """

    topics: Mapping[str, Any]
    groups: Mapping[str, Any] | None = None
    nodes: list[Node] = field(default_factory=lambda: [Node(b, r) for b, r in RACKS.items()])
    errors: dict[str, BaseException] = field(default_factory=dict)
    down: bool = False
    cluster_described: int = 0
    groups_described: list[list[str]] = field(default_factory=list)
    #: ListOffsets: (topic, partition) -> end offset, others fail UNKNOWN_TOPIC_OR_PART (empty: unsupported)
    ends: dict[tuple[str, int], int] = field(default_factory=dict)

    def describe_cluster(self, **kw: Any) -> Future[Any]:
        assert kw.get("include_authorized_operations") is False
        if self.down:
            return kafka_error(KafkaError._TRANSPORT)
        self.cluster_described += 1
        return done(type("C", (), {"nodes": list(self.nodes)})())

    def list_topics(self, topic: str | None = None, timeout: float = 0) -> Any:
        if self.down:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        brokers = [n.id for n in self.nodes]
        if all(isinstance(v, TopicMeta) for v in self.topics.values()):
            return ClusterMeta(dict(self.topics), dict.fromkeys(brokers))
        errors = {t: e.args[0] for t, e in self.errors.items()}
        return cluster_metadata(self.topics, brokers, errors)

    def describe_consumer_groups(self, group_ids: list[str], **_kw: Any) -> dict[str, Future[Any]]:
        self.groups_described.append(list(group_ids))
        if self.groups is None:
            return {g: kafka_error(KafkaError._UNSUPPORTED_FEATURE) for g in group_ids}
        out: dict[str, Future[Any]] = {}
        for g in group_ids:
            d = self.groups.get(g, GroupDesc(g, [], "DEAD"))
            out[g] = d if isinstance(d, Future) else done(d)
        return out

    def describe_configs(self, resources: list[Any], **_kw: Any) -> dict[Any, Future[Any]]:
        return {r: kafka_error(KafkaError._UNSUPPORTED_FEATURE) for r in resources}

    def create_topics(self, new_topics: list[Any], **_kw: Any) -> dict[str, Future[Any]]:
        return {t.topic: kafka_error(KafkaError._UNSUPPORTED_FEATURE) for t in new_topics}

    def list_offsets(self, topic_partition_offsets: dict[Any, Any], **_kw: Any) -> dict[Any, Future[Any]]:
        if self.down:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        code = KafkaError.UNKNOWN_TOPIC_OR_PART if self.ends else KafkaError._UNSUPPORTED_FEATURE
        got = {tp: self.ends.get((tp.topic, tp.partition), -1) for tp in topic_partition_offsets}
        return {tp: kafka_error(code) if e < 0 else done(TopicPartition("", 0, e)) for tp, e in got.items()}

    def poll(self, _timeout: float) -> int:
        return 0


class FakePublisher:
    """Confirms every record at once, in memory; ``fail``: every wait for a confirmation fails instead.

    ``decode``: keep each value as the JSON it encodes (tests read it back with
    :meth:`on`); a benchmark turns it off so that only the agent's own work is timed.
    """

    def __init__(self, *, decode: bool = True) -> None:
        self.records: list[tuple[str, str, Any]] = []
        self.fail = False
        self.decode = decode

    def publish(self, topic: str, key: str, value: bytes | None, timeout_s: float) -> None:
        self.publish_many(topic, [(key, value)], timeout_s)

    def publish_many(self, topic: str, records: list[tuple[str, bytes | None]], timeout_s: float) -> None:
        if self.fail:
            raise PublishError("brokers unreachable")
        for key, value in records:
            kept = json.loads(value) if self.decode and value is not None else value
            self.records.append((topic, key, kept))

    def publish_each(
        self, topic: str, records: list[tuple[str, bytes | None]], timeout_s: float
    ) -> list[PublishError | None]:
        """Like the real one: every record on its own, one outcome each."""
        out: list[PublishError | None] = []
        for record in records:
            try:
                self.publish_many(topic, [record], timeout_s)
            except PublishError as e:
                out.append(e)
            else:
                out.append(None)
        return out

    def send(self, topic: str, key: str, value: bytes, on_result: Callable[[str | None], None]) -> None:
        try:
            self.publish_many(topic, [(key, value)], 0.0)
        except PublishError as e:
            on_result(str(e))
        else:
            on_result(None)

    def poll(self) -> None:
        return None

    def flush(self, timeout_s: float) -> int:
        return 0

    def on(self, topic: str) -> list[tuple[str, Any]]:
        """Keys and (decoded) values published to ``topic``, in order."""
        return [(k, v) for t, k, v in self.records if t == topic]
