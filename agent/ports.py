"""The agent's seams to the outside, as typed Protocols: what it asks of Kafka, of its publisher, of its log.

The agent is written against these, never against confluent-kafka's classes
or ``Any``: the real clients (``confluent_kafka.admin.AdminClient``,
:class:`rackplan.agent.kafka_io.Publisher`, a structlog ``BoundLogger``) satisfy
them structurally, and so do the fakes of :mod:`rackplan.agent.testing` that
the unit tests and benchmarks run the same loop with.  Only the calls the agent
makes are listed: a fake needs nothing more, and a new call on a client shows
up here first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Protocol

#: seconds since the epoch (``time.time``): a test passes a hand-wound one
Clock = Callable[[], float]

#: one record to publish: key, value (None: a tombstone)
KeyValue = tuple[str, bytes | None]


class AdminPort(Protocol):
    """The AdminClient calls the agent makes (metadata, racks, groups, topic configuration and creation)."""

    def list_topics(self, topic: str | None = ..., timeout: float = ...) -> Any:
        """confluent-kafka's ``ClusterMetadata``: ``topics`` and ``brokers``."""
        ...

    def describe_cluster(self, **kwargs: Any) -> Future[Any]: ...

    def describe_consumer_groups(self, group_ids: list[str], **kwargs: Any) -> dict[str, Future[Any]]: ...

    def describe_configs(self, resources: list[Any], **kwargs: Any) -> dict[Any, Future[Any]]: ...

    def create_topics(self, new_topics: list[Any], **kwargs: Any) -> dict[str, Future[Any]]: ...


class PlanPublisher(Protocol):
    """What publishes the agent's records: plans (confirmed, each on its own), tombstones, alerts, heartbeats.

    :class:`rackplan.agent.kafka_io.Publisher` is the real one; every method
    but :meth:`send` and :meth:`poll` waits for the brokers' confirmation and
    raises :class:`rackplan.agent.kafka_io.PublishError` without it.
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
