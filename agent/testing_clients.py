"""Stand-ins for the plan follower's clients (:mod:`rackplan.agent.follower`) and the control tails.

:class:`FakeKafka` is what a follower's fake consumers and producers share
(logs, committed offsets, group members, records); :class:`FakeControlTail`
stands for a tail of the control topics (the follower's and the agent's).  The
agent's admin-side stand-ins are in :mod:`rackplan.agent.testing`; like them,
these ship in the package so that a benchmark never imports a test module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from .kafka.tail import RawRecord


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
    #: the group's coordinator is away: joins and leaves wait (a consumer's close still revokes locally, as
    #: librdkafka's does), and membership stays as it was
    coordinator_away: bool = False
    #: a consumer's close serves a leave still waiting (its revoke callback runs); False: it never calls back
    close_revokes: bool = True
    #: called with each consumer poll's timeout, so that a test's clock passes as the poll waits
    poll_clock: Callable[[float], None] | None = None
    #: commits wait for the group's coordinator: none lands or is answered until this is False again (then
    #: each lands and is answered, in order, at a poll); a committed-offset lookup times out meanwhile
    commits_hang: bool = False

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
        #: rebalance callbacks (joining, leaving): they wait while the coordinator is away
        self.rebalances: list[Callable[[], None]] = []
        self.subscribed: dict[str, Any] | None = None
        self.closed = False
        #: commits sent while :attr:`FakeKafka.commits_hang`
        self.held: list[Callable[[], None]] = []

    def _commit_refusal(self) -> KafkaError | None:
        if self.subscribed is None and self.kafka.members - {id(self)}:
            return KafkaError(KafkaError.UNKNOWN_MEMBER_ID)
        return None

    def commit(self, *, offsets: list[Any], asynchronous: bool = True) -> Any:
        if self.kafka.commits_hang and asynchronous:
            self.held.append(lambda: self.commit(offsets=offsets))
            return None
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

        if self.kafka.commits_hang:
            if self.kafka.poll_clock is not None:
                self.kafka.poll_clock(timeout)
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))

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

        self.rebalances.append(assign)

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
        self.rebalances.append(leave)

    def poll(self, timeout: float = 0) -> FakeMessage | None:
        if self.kafka.poll_clock is not None:
            self.kafka.poll_clock(timeout)
        while self.held and not self.kafka.commits_hang:
            self.held.pop(0)()
        while self.pending:
            self.pending.pop(0)()
        while self.rebalances and not self.kafka.coordinator_away:
            self.rebalances.pop(0)()
        for (t, p), pos in sorted(self.positions.items()):
            if pos < len(self.kafka.logs.get((t, p), [])):
                self.positions[(t, p)] = pos + 1
                return FakeMessage(t, p, pos)
        return None

    def close(self) -> None:
        """A leave still waiting is served (the revoke callback runs) unless ``close_revokes`` is False."""
        if self.subscribed is not None:
            self.unsubscribe()
        leaves = [cb for cb in self.rebalances if cb.__name__ == "leave" and self.kafka.close_revokes]
        self.rebalances = []
        for leave in leaves:
            leave()
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
