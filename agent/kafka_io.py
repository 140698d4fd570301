"""Kafka I/O around the plan and alert topics: create, read back, publish with confirmation."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .logging import kafka_logger
from .plans import PlanDecodeError, PlanRecord, decode_record

_UNSUPPORTED = {
    "_UNSUPPORTED_FEATURE",
    "UNSUPPORTED_VERSION",
    "INVALID_REQUEST",
    "CLUSTER_AUTHORIZATION_FAILED",
}


def _error_name(e: BaseException) -> str:
    """The KafkaError name inside a KafkaException (``""`` for anything else)."""
    err = e.args[0] if e.args else None
    name = getattr(err, "name", None)
    return str(name()) if callable(name) else ""


class PublishError(RuntimeError):
    """A record was not confirmed by the brokers."""


class PlanTooLargeError(PublishError):
    """A plan exceeds the producer's or topic's maximum message size even compressed."""


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    config: Mapping[str, str]

    def command(self) -> str:
        """The kafka-topics.sh line an operator can run when the agent cannot create it."""
        conf = " ".join(f"--config {k}={v}" for k, v in sorted(self.config.items()))
        return (
            f"kafka-topics.sh --bootstrap-server <brokers> --create --topic {self.name} "
            f"--partitions {self.partitions} {conf}"
        ).strip()


def ensure_topics(
    admin: Any, specs: list[TopicSpec], timeout_s: float, log: Any, fallback: bool = False
) -> list[TopicSpec]:
    """Create missing topics with CreateTopics; returns those still missing (logged with how to create them).

    ``fallback``: the caller can create them another way (the embedded cluster), so a failure is a warning.
    """
    from confluent_kafka.cimpl import NewTopic

    existing = set(admin.list_topics(timeout=timeout_s).topics)
    missing = [s for s in specs if s.name not in existing]
    if not missing:
        return []
    futures = admin.create_topics(
        [NewTopic(s.name, s.partitions, config=dict(s.config)) for s in missing],
        request_timeout=timeout_s,
    )
    still: list[TopicSpec] = []
    for s in missing:
        try:
            futures[s.name].result(timeout=timeout_s + 5)
            log.info("topic created", topic=s.name, partitions=s.partitions, config=dict(s.config))
        except Exception as e:
            name = _error_name(e)
            if name == "TOPIC_ALREADY_EXISTS":
                continue
            still.append(s)
            (log.warning if fallback else log.error)(
                "cannot create topic; create it by hand",
                topic=s.name,
                error=str(e),
                broker_lacks_create_topics=name in _UNSUPPORTED,
                command=s.command(),
            )
    return still


def read_back(
    config: Mapping[str, Any], topic: str, timeout_s: float, log: Any
) -> list[tuple[str, PlanRecord | None]]:
    """Every record of the plan topic, oldest first per partition, up to the current end.

    Malformed records are skipped with a logged reason; they never stop the agent.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            **config,
            "group.id": "rackplan-replay",  # required by the client; no offsets are committed
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "logger": kafka_logger(),
        }
    )
    out: list[tuple[str, PlanRecord | None]] = []
    try:
        md = consumer.list_topics(topic, timeout=timeout_s)
        tmd = md.topics.get(topic)
        if tmd is None or tmd.error is not None:
            raise PublishError(f"plan topic {topic!r} unavailable: {None if tmd is None else tmd.error}")
        pending: dict[int, int] = {}
        assign = []
        for p in sorted(tmd.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            if high > low:
                pending[p] = high
                assign.append(TopicPartition(topic, p, OFFSET_BEGINNING))
        if not assign:
            return out
        consumer.assign(assign)
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise PublishError(
                    f"plan topic {topic!r}: replay timed out with partitions {sorted(pending)}"
                )
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            p = msg.partition() or 0
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    pending.pop(p, None)
                    continue
                raise PublishError(f"plan topic {topic!r}: {error}")
            offset = msg.offset() or 0
            if offset + 1 >= pending.get(p, 0):
                pending.pop(p, None)
            raw_key = msg.key()
            if raw_key is None:
                log.warning("plan record skipped", reason="no key", partition=p, offset=offset)
                continue
            try:
                key = raw_key.decode("utf-8")
                out.append((key, decode_record(key, msg.value())))
            except (PlanDecodeError, UnicodeDecodeError) as e:
                log.warning("plan record skipped", reason=str(e), partition=p, offset=offset)
    finally:
        consumer.close()
    return out


class Publisher:
    """Idempotent, acks=all, zstd producer; :meth:`publish` returns once the broker confirmed."""

    def __init__(self, config: Mapping[str, Any], max_message_bytes: int, logger: Any = None) -> None:
        from confluent_kafka import Producer

        conf: dict[str, Any] = {
            **config,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": "zstd",
            "message.max.bytes": max_message_bytes,
            "linger.ms": 5,
        }
        if logger is not None:
            conf["logger"] = logger
        self._producer = Producer(conf)
        self.max_message_bytes = max_message_bytes

    def publish(self, topic: str, key: str, value: bytes | None, timeout_s: float) -> None:
        """Send one record and wait for its delivery report."""
        self.publish_many(topic, [(key, value)], timeout_s)

    def publish_many(self, topic: str, records: list[tuple[str, bytes | None]], timeout_s: float) -> None:
        """Send records and wait for every delivery report; raise if any failed."""
        from confluent_kafka import KafkaException

        results: dict[int, Any] = {}

        def report(i: int) -> Callable[[Any, Any], None]:
            def cb(err: Any, _msg: Any) -> None:
                results[i] = err

            return cb

        for i, (key, value) in enumerate(records):
            try:
                self._producer.produce(topic, key=key.encode(), value=value, on_delivery=report(i))
            except KafkaException as e:
                if _error_name(e) == "MSG_SIZE_TOO_LARGE":
                    raise PlanTooLargeError(
                        f"{key}: {len(value or b'')} bytes exceed message.max.bytes {self.max_message_bytes}"
                    ) from e
                raise PublishError(f"{key}: {e}") from e
            except BufferError as e:
                raise PublishError(f"{key}: producer queue full: {e}") from e
            self._producer.poll(0)
        deadline = time.monotonic() + timeout_s
        while len(results) < len(records):
            left = deadline - time.monotonic()
            if left <= 0:
                raise PublishError(
                    f"{len(records) - len(results)} record(s) to {topic} not confirmed in time"
                )
            self._producer.flush(min(left, 1.0))
        failed = {records[i][0]: err for i, err in sorted(results.items()) if err is not None}
        if failed:
            first_key, first = next(iter(failed.items()))
            if getattr(first, "name", lambda: "")() in ("MSG_SIZE_TOO_LARGE", "MESSAGE_TOO_LARGE"):
                raise PlanTooLargeError(f"{first_key}: plan exceeds the topic's max.message.bytes: {first}")
            raise PublishError(f"{len(failed)} record(s) to {topic} failed, first {first_key}: {first}")

    def flush(self, timeout_s: float) -> int:
        remaining: int = self._producer.flush(timeout_s)
        return remaining
