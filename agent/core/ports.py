"""The agent's seams to the outside, as typed Protocols: what it asks of Kafka, of its publisher, of its log.

The agent is written against these, never against confluent-kafka's classes
or ``Any``: the real clients (``confluent_kafka.admin.AdminClient``,
:class:`rackplan.agent.kafka.publisher.Publisher`, a structlog ``BoundLogger``) satisfy
them structurally, and so do the fakes of :mod:`rackplan.agent.testing` (and
:mod:`rackplan.agent.testing_clients`) that
the unit tests and benchmarks run the same loop with.  Only the calls the agent
makes are listed: a fake needs nothing more, and a new call on a client shows
up here first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Literal, Protocol, runtime_checkable

#: seconds since the epoch (``time.time``): a test passes a hand-wound one
Clock = Callable[[], float]

#: one record to publish: key, value (None: a tombstone)
KeyValue = tuple[str, bytes | None]


class AdminPort(Protocol):
    """The AdminClient calls the agent makes (metadata, racks, groups, topic configuration and creation,
    end offsets for traffic)."""

    def list_topics(self, topic: str | None = ..., timeout: float = ...) -> Any:
        """confluent-kafka's ``ClusterMetadata``: ``topics`` and ``brokers``."""
        ...

    def describe_cluster(self, **kwargs: Any) -> Future[Any]: ...

    def describe_consumer_groups(self, group_ids: list[str], **kwargs: Any) -> dict[str, Future[Any]]: ...

    def describe_configs(self, resources: list[Any], **kwargs: Any) -> dict[Any, Future[Any]]: ...

    def create_topics(self, new_topics: list[Any], **kwargs: Any) -> dict[str, Future[Any]]: ...

    def list_offsets(self, topic_partition_offsets: dict[Any, Any], **kwargs: Any) -> dict[Any, Future[Any]]:
        """ListOffsets: one future per ``TopicPartition``, resolving to a result with an ``offset``."""
        ...


@runtime_checkable
class GroupOffsetsPort(Protocol):
    """An admin client that can also list a group's committed offsets (the real one does; most fakes do
    not, and the figure that needs it is then not measured)."""

    def list_consumer_group_offsets(self, requests: list[Any], **kwargs: Any) -> dict[str, Future[Any]]:
        """ListConsumerGroupOffsets: one future per group id, resolving to its ``topic_partitions``."""
        ...


class PlanPublisher(Protocol):
    """What publishes the agent's records: plans (confirmed, each on its own), tombstones, alerts, heartbeats.

    :class:`rackplan.agent.kafka.publisher.Publisher` is the real one; every method
    but :meth:`send` and :meth:`poll` waits for the brokers' confirmation and
    raises :class:`rackplan.agent.kafka.exceptions.PublishError` without it.
    """

    def publish(self, topic: str, key: str, value: bytes | None, timeout_s: float) -> None: ...

    def publish_many(self, topic: str, records: list[KeyValue], timeout_s: float) -> None: ...

    def publish_each(
        self, topic: str, records: list[KeyValue], timeout_s: float
    ) -> Sequence[Exception | None]:
        """One outcome per record, in order: None when confirmed, else the error (a ``PublishError``)."""
        ...

    def send(self, topic: str, key: str, value: bytes, on_result: Callable[[str | None], None]) -> None:
        """Never waited for: ``on_result`` gets None (delivered) or the error, from a later :meth:`poll`."""
        ...

    def poll(self) -> None: ...

    def flush(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for what is in flight; the count left unconfirmed."""
        ...


class Logger(Protocol):
    """The part of structlog's ``BoundLogger`` the agent uses: one event name, key-value context."""

    def debug(self, event: str, *args: Any, **kw: Any) -> Any: ...

    def info(self, event: str, *args: Any, **kw: Any) -> Any: ...

    def warning(self, event: str, *args: Any, **kw: Any) -> Any: ...

    def error(self, event: str, *args: Any, **kw: Any) -> Any: ...

    def bind(self, **kw: Any) -> Any: ...


# ---- the plan follower's seams (rackplan.agent.follower) ----------------------------------------------

#: a topic and partition, as the follower names them
TopicPart = tuple[str, int]

#: a steady clock in seconds (``time.monotonic``): how long something has waited
Monotonic = Callable[[], float]


#: a rebalance callback of group subscription: the consumer and its ``TopicPartition``s
RebalanceCallback = Callable[[Any, list[Any]], None]
#: a delivery report: the error (None: delivered) and the message
DeliveryCallback = Callable[[Any, Any], None]


class KafkaMessage(Protocol):
    """What the follower reads of a confluent-kafka ``Message``: its place, or that it is an error event."""

    def error(self) -> Any: ...

    def topic(self) -> str | None: ...

    def partition(self) -> int | None: ...

    def offset(self) -> int | None: ...


class FollowerConsumer(Protocol):
    """The confluent-kafka ``Consumer`` calls the follower makes: manual assignment, plain commits,
    and ordinary group subscription when it falls back."""

    def poll(self, timeout: float = ...) -> Any: ...

    def commit(self, *, offsets: list[Any], asynchronous: Literal[True] = ...) -> None:
        """An asynchronous commit: its outcome reaches the ``on_commit`` callback of the consumer's config."""
        ...

    def committed(self, partitions: list[Any], timeout: float = ...) -> list[Any]: ...

    def get_watermark_offsets(self, partition: Any, timeout: float = ..., cached: bool = ...) -> Any: ...

    def incremental_assign(self, partitions: list[Any]) -> None: ...

    def incremental_unassign(self, partitions: list[Any]) -> None: ...

    def unassign(self) -> None: ...

    def subscribe(
        self,
        topics: list[str],
        on_assign: RebalanceCallback | None = ...,
        on_revoke: RebalanceCallback | None = ...,
        on_lost: RebalanceCallback | None = ...,
    ) -> None: ...

    def unsubscribe(self) -> None: ...

    def close(self) -> None: ...


class FollowerProducer(Protocol):
    """The confluent-kafka ``Producer`` calls the follower's registrations make (never waited for but at close)."""

    def produce(
        self, topic: str, *, key: bytes, value: bytes | None, on_delivery: DeliveryCallback | None = ...
    ) -> None: ...

    def poll(self, timeout: float = ...) -> int: ...

    def flush(self, timeout: float = ...) -> int: ...

    def purge(self) -> None: ...


class ControlTail(Protocol):
    """A tail of the plan and lease topics (:class:`rackplan.agent.kafka.tail.TopicTail` is the real one)."""

    @property
    def topics(self) -> tuple[str, ...]: ...

    def read_available(self, timeout_s: float) -> tuple[list[Any], bool]:
        """Every record up to the topics' ends (``RawRecord``s), and whether the ends were reached."""
        ...

    def read_new(self) -> tuple[list[Any], list[str]]:
        """What was added since the last read, and the errors met (never raised)."""
        ...

    def close(self) -> None: ...


#: how the follower makes its clients from a librdkafka config (the tail also gets its topics and timeout)
ConsumerFactory = Callable[[dict[str, Any]], FollowerConsumer]
ProducerFactory = Callable[[dict[str, Any]], FollowerProducer]
TailFactory = Callable[[dict[str, Any], Sequence[str], float], ControlTail]
