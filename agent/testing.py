"""The one set of stand-ins for the agent's Kafka seams (:mod:`rackplan.agent.core.ports`), for tests and benchmarks.

They answer like confluent-kafka's AdminClient and like
:class:`rackplan.agent.kafka.publisher.Publisher`, from data given beforehand, so the
agent's real cycle runs without a broker: the unit tests (``tests/``) and the
benchmarks (``bench/``) share these, and nothing else stands in for Kafka.
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
from .kafka.tail import RawRecord

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


# ---- the plan follower's clients (rackplan.agent.follower) -----------------------------------------


@dataclass
class FakeKafka:
    """What a follower's fake clients share: logs of ``topic``, committed offsets, group members, records.

    It keeps what matters to the follower's safety: committed offsets, and
    whether the group has members in group subscription (Kafka refuses a plain
    commit then, which is the follower's fence).  ``deliver`` False: every
    record times out; ``refuse``: the authorizer's answer to records,
    ``"topic"`` (no Write on the topic) or ``"fatal"`` (no right to an
    idempotent producer id: librdkafka's fatal error, that producer can never
    produce again).  ``events`` lists commits, assigns and unassigns in order.
    :meth:`forget_topic`: every producer made so far believes the topic gone,
    as librdkafka's do after one Metadata answer that lacked it.
    """

    topic: str = "orders"
    partitions: int = 4
    logs: dict[tuple[str, int], list[bytes]] = field(default_factory=dict)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    members: set[int] = field(default_factory=set)
    records: list[tuple[str, bytes, bytes | None]] = field(default_factory=list)
    deliver: bool = True
    refuse: str = ""
    producers: int = 0
    #: producers up to this serial believe the topic gone (``_UNKNOWN_TOPIC`` at once)
    topic_gone_up_to: int = 0
    #: with ``refuse == "fatal"``: the fatal error arrives only while a ``flush`` waits (a producer just
    #: made), which confluent-kafka 2.16 raises as a ``SystemError`` caused by the ``KafkaException``
    fatal_in_flush: bool = False
    #: with ``refuse == "fatal"``: the producer turns fatal on its own (librdkafka's thread) after its first
    #: record and before the next, which meets ``_FATAL`` alone; the cause waits for the next poll (as on
    #: real Kafka: the first record's poll came before the producer id was refused)
    fatal_cause_queued: bool = False
    events: list[tuple[str, Any]] = field(default_factory=list)
    consumers: list[FakeConsumer] = field(default_factory=list)

    def forget_topic(self) -> None:
        """Every producer made so far fails each record at once with ``_UNKNOWN_TOPIC``; new ones do not."""
        self.topic_gone_up_to = self.producers

    def append(self, p: int, n: int) -> None:
        """``n`` more messages in partition ``p`` of :attr:`topic`."""
        self.logs.setdefault((self.topic, p), []).extend(b"m" for _ in range(n))

    def consumer(self, config: dict[str, Any]) -> FakeConsumer:
        c = FakeConsumer(self, config)
        self.consumers.append(c)
        return c

    def producer(self, config: dict[str, Any]) -> FakeProducer:
        return FakeProducer(self)

    def registrations(self, topic: str = "_rackplan.registrations") -> list[Any]:
        """The registration records accepted on ``topic``, decoded and checked as the agent does (no signature)."""
        from .groups.registry import decode_registration

        return [decode_registration(k, v, 0) for t, k, v in self.records if t == topic]


class FakeMessage:
    """A confluent-kafka ``Message`` of :class:`FakeKafka`: a place, never an error event."""

    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self._t, self._p, self._o = topic, partition, offset

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o


class FakeConsumer:
    """A consumer of :class:`FakeKafka`: callbacks (commits, rebalances) run at the next :meth:`poll`."""

    def __init__(self, kafka: FakeKafka, config: dict[str, Any]) -> None:
        self.kafka = kafka
        self.config = config
        self.positions: dict[tuple[str, int], int] = {}
        self.pending: list[Callable[[], None]] = []
        self.subscribed: dict[str, Any] | None = None
        self.closed = False

    def _commit_refusal(self) -> KafkaError | None:
        if self.subscribed is None and self.kafka.members - {id(self)}:
            return KafkaError(KafkaError.UNKNOWN_MEMBER_ID)
        return None

    def commit(self, *, offsets: list[Any], asynchronous: bool = True) -> Any:
        err = self._commit_refusal()
        if err is None:
            for tp in offsets:
                self.kafka.committed[(tp.topic, tp.partition)] = tp.offset
            self.kafka.events.append(("commit", sorted((tp.partition, tp.offset) for tp in offsets)))
        if asynchronous:
            cb = self.config["on_commit"]
            self.pending.append(lambda: cb(err, offsets))
            return None
        if err is not None:
            raise KafkaException(err)
        return offsets

    def committed(self, partitions: list[Any], timeout: float = 0) -> list[Any]:
        from confluent_kafka import TopicPartition

        return [
            TopicPartition(tp.topic, tp.partition, self.kafka.committed.get((tp.topic, tp.partition), -1001))
            for tp in partitions
        ]

    def get_watermark_offsets(
        self, partition: Any, timeout: float = 0, cached: bool = False
    ) -> tuple[int, int]:
        return 0, len(self.kafka.logs.get((partition.topic, partition.partition), []))

    def incremental_assign(self, partitions: list[Any]) -> None:
        for tp in partitions:
            self.positions[(tp.topic, tp.partition)] = tp.offset
        self.kafka.events.append(("assign", sorted(tp.partition for tp in partitions)))

    def incremental_unassign(self, partitions: list[Any]) -> None:
        for tp in partitions:
            self.positions.pop((tp.topic, tp.partition), None)
        self.kafka.events.append(("unassign", sorted(tp.partition for tp in partitions)))

    def unassign(self) -> None:
        self.positions.clear()

    def subscribe(
        self, topics: list[str], on_assign: Any = None, on_revoke: Any = None, on_lost: Any = None
    ) -> None:
        """Join the group; the group gives this member every partition of :attr:`FakeKafka.topic`."""
        from confluent_kafka import TopicPartition

        self.subscribed = {"assign": on_assign, "revoke": on_revoke}
        self.kafka.members.add(id(self))
        parts = [TopicPartition(self.kafka.topic, p) for p in range(self.kafka.partitions)]

        def assign() -> None:
            for tp in parts:
                self.positions[(tp.topic, tp.partition)] = self.kafka.committed.get(
                    (tp.topic, tp.partition), 0
                )
            on_assign(self, parts)

        self.pending.append(assign)

    def unsubscribe(self) -> None:
        from confluent_kafka import TopicPartition

        assert self.subscribed is not None
        revoke = self.subscribed["revoke"]
        parts = [TopicPartition(t, p) for t, p in sorted(self.positions)]

        def leave() -> None:
            revoke(self, parts)
            self.positions.clear()
            self.kafka.members.discard(id(self))

        self.subscribed = None
        self.pending.append(leave)

    def poll(self, timeout: float = 0) -> FakeMessage | None:
        while self.pending:
            self.pending.pop(0)()
        for (t, p), pos in sorted(self.positions.items()):
            if pos < len(self.kafka.logs.get((t, p), [])):
                self.positions[(t, p)] = pos + 1
                return FakeMessage(t, p, pos)
        return None

    def close(self) -> None:
        self.closed = True
        self.kafka.members.discard(id(self))


class FakeProducer:
    """A producer of :class:`FakeKafka`: delivery reports at the next :meth:`poll`, as librdkafka's."""

    def __init__(self, kafka: FakeKafka) -> None:
        self.kafka = kafka
        self.pending: list[Callable[[], None]] = []
        self.fatal = False
        #: fatal, and the cause not served yet (:attr:`FakeKafka.fatal_cause_queued`)
        self.cause_queued = False
        self.made = 0
        kafka.producers += 1
        self.serial = kafka.producers

    def produce(self, topic: str, *, key: bytes, value: bytes | None, on_delivery: Any = None) -> None:
        if self.kafka.refuse == "fatal" and self.kafka.fatal_cause_queued and self.made and not self.fatal:
            self.fatal = self.cause_queued = True  # turned fatal since the last record
        self.made += 1
        if self.fatal:
            raise KafkaException(KafkaError(KafkaError._FATAL, "Unable to produce message"))
        if self.serial <= self.kafka.topic_gone_up_to:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_TOPIC, "Unable to produce message"))
        err = None if self.kafka.deliver else KafkaError(KafkaError._MSG_TIMED_OUT)
        if self.kafka.refuse == "topic":
            err = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
        if err is None and not self.kafka.refuse:
            self.kafka.records.append((topic, key, value))
        if on_delivery is not None and self.kafka.refuse != "fatal":
            self.pending.append(lambda: on_delivery(err, None))

    def poll(self, timeout: float = 0) -> int:
        if self.cause_queued:
            self.cause_queued = False
            raise self._fatal()
        quiet = self.kafka.fatal_in_flush or self.kafka.fatal_cause_queued
        if self.kafka.refuse == "fatal" and not self.fatal and not quiet:
            self.fatal = True
            raise self._fatal()
        done, self.pending = self.pending, []
        for cb in done:
            cb()
        return len(done)

    def flush(self, timeout: float = 0) -> int:
        if self.kafka.refuse == "fatal" and not self.fatal and self.kafka.fatal_in_flush:
            self.fatal = True
            try:
                raise self._fatal()
            except KafkaException as e:
                raise SystemError(
                    "<method '__getitem__' of 'dict' objects> returned a result with an exception set"
                ) from e
        self.poll()
        return 0

    @staticmethod
    def _fatal() -> KafkaException:
        return KafkaException(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED, "no PID", fatal=True))

    def purge(self) -> None:
        self.pending = []


class FakeControlTail:
    """A follower's tail of the plan and lease topics: a test pushes records, the next read returns them."""

    def __init__(self, topics: Sequence[str]) -> None:
        self.topics = tuple(topics)
        self.backlog: list[RawRecord] = []
        self.offset = 0

    def push(
        self, topic: str, key: bytes | None, value: bytes | None, headers: tuple[tuple[str, bytes], ...] = ()
    ) -> None:
        self.backlog.append(RawRecord(0, self.offset, key, value, None, topic, headers))
        self.offset += 1

    def read_available(self, timeout_s: float) -> tuple[list[RawRecord], bool]:
        out, self.backlog = self.backlog, []
        return out, True

    def read_new(self) -> tuple[list[RawRecord], list[str]]:
        out, self.backlog = self.backlog, []
        return out, []

    def close(self) -> None:
        pass
