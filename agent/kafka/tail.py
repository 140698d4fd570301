"""Reading topics without a consumer group: from their beginning, then whatever was added since.

:class:`TopicTail` serves the plan-topic replay, the registrations topic, the lease topic and a
follower's control topics; :func:`read_to_end` is the one-shot read every replay makes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.logging import with_kafka_logger
from .errors import REFUSED, TRANSIENT, error_name
from .exceptions import TopicReadError


@dataclass(frozen=True, slots=True)
class RawRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    #: the record's timestamp (create or log-append time), None when it has none
    timestamp_ms: int | None
    topic: str = ""
    #: Kafka record headers, in order (rackplan marks its own records with :data:`WRITER_HEADER`)
    headers: tuple[tuple[str, bytes], ...] = ()

    def header(self, name: str) -> bytes | None:
        """The last value of header ``name``, None when absent."""
        out = None
        for k, v in self.headers:
            if k == name:
                out = v
        return out


#: how long a broker may hold a fetch of a tail with nothing new: what a new record waits at most
TAIL_FETCH_WAIT_MS = 100


class TopicTail:
    """Reads topics from their beginning, then on each call whatever was added since; no consumer group.

    Used for the plan-topic replay (read once to the end), the registrations
    topic (read to the end every cycle) and a follower's control topics (plan
    and lease).  Partitions are those the topics have when the tail is opened.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        topic: str | Sequence[str],
        timeout_s: float,
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        topics = [topic] if isinstance(topic, str) else list(topic)
        self.topic = topics[0]
        self.topics = tuple(topics)
        self._consumer = Consumer(
            with_kafka_logger(
                {
                    **config,
                    "group.id": "rackplan-reader",  # required by the client; nothing is committed
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    "auto.offset.reset": "earliest",
                    "fetch.wait.max.ms": TAIL_FETCH_WAIT_MS,
                    **(overrides or {}),
                }
            )
        )
        self._partitions: list[tuple[str, int]] = []
        try:
            deadline = time.monotonic() + timeout_s
            for t in topics:
                self._partitions += [(t, p) for p in self._topic_partitions(t, deadline)]
            self._consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in self._partitions])
        except BaseException:
            self._consumer.close()
            raise
        #: next offset to read per partition, as far as records seen tell
        self._next = dict.fromkeys(self._partitions, 0)

    def _topic_partitions(self, topic: str, deadline: float) -> list[int]:
        """The topic's partitions; a topic brokers do not know yet (just created) is asked again until the deadline."""
        while True:
            md = self._consumer.list_topics(topic, timeout=max(0.5, deadline - time.monotonic()))
            tmd = md.topics.get(topic)
            if tmd is not None and tmd.error is None and tmd.partitions:
                return sorted(tmd.partitions)
            if tmd is not None and tmd.error is not None and tmd.error.name() in REFUSED:
                # the brokers' answer (ACLs), not a topic they do not know yet: waiting changes nothing
                raise TopicReadError(
                    f"topic {topic!r} not readable: {tmd.error.name()} (no Describe right)", tmd.error.name()
                )
            if time.monotonic() >= deadline:
                raise TopicReadError(
                    f"topic {topic!r} unavailable: {None if tmd is None else tmd.error}",
                    "UNKNOWN_TOPIC_OR_PART" if tmd is None or tmd.error is None else tmd.error.name(),
                )
            time.sleep(0.1)

    def read_available(self, timeout_s: float) -> tuple[list[RawRecord], bool]:
        """Records up to the end offsets as of this call; False when the deadline cut the read short.

        Records returned are never returned again, complete or not.
        """
        from confluent_kafka import KafkaError, TopicPartition

        deadline = time.monotonic() + timeout_s
        targets: dict[tuple[str, int], int] = {}
        for t, p in self._partitions:
            while True:
                try:
                    low, high = self._consumer.get_watermark_offsets(
                        TopicPartition(t, p), timeout=max(0.5, deadline - time.monotonic()), cached=False
                    )
                    break
                except Exception as e:  # KafkaException: partition leader unreachable, moving, ...
                    # A topic created a moment ago, or a leader that just moved: brokers catch up in
                    # moments; only the deadline makes it an error.
                    if error_name(e, "") not in TRANSIENT or time.monotonic() >= deadline:
                        raise TopicReadError(
                            f"topic {t!r} partition {p}: end offset unknown: {e}", error_name(e, "")
                        ) from e
                    time.sleep(0.1)
            if high > max(low, self._next[(t, p)]):
                targets[(t, p)] = high
        out: list[RawRecord] = []
        while targets:
            left = deadline - time.monotonic()
            if left <= 0:
                return out, False
            msg = self._consumer.poll(min(left, 0.5))
            if msg is None:
                continue
            tp = (msg.topic() or "", msg.partition() or 0)
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    self._reached(tp, msg.offset())
                    if self._next[tp] >= targets.get(tp, 0):
                        targets.pop(tp, None)
                    continue
                raise TopicReadError(f"topic {tp[0]!r}: {error}", error.name())
            out.append(self._record(msg, tp))
            if self._next[tp] >= targets.get(tp, 0):
                targets.pop(tp, None)
        return out, True

    def _reached(self, tp: tuple[str, int], offset: int | None) -> None:
        """An end-of-partition event: the position is ``offset``, past any offset no reader is given.

        A transactional producer (the agent's plan publisher) ends each transaction with a commit
        marker, an offset that is never delivered: the last record read says the position is just
        before the marker, only this event says it is past it.  The event comes once per end reached,
        to whichever read polls it, so every read keeps what it says.
        """
        self._next[tp] = max(self._next.get(tp, 0), offset or 0)

    def _record(self, msg: Any, tp: tuple[str, int]) -> RawRecord:
        offset = msg.offset() or 0
        self._next[tp] = max(self._next.get(tp, 0), offset + 1)
        ts_type, ts = msg.timestamp()
        headers = tuple((k, v or b"") for k, v in (msg.headers() or ()))
        return RawRecord(tp[1], offset, msg.key(), msg.value(), ts if ts_type != 0 else None, tp[0], headers)

    def read_new(self, max_records: int = 100_000) -> tuple[list[RawRecord], list[str]]:
        """Records already fetched, without waiting or asking for end offsets; and transient errors seen.

        The cheap per-cycle read once the topic was read to its end: a record
        produced meanwhile arrives in this call or a later one.
        """
        from confluent_kafka import KafkaError

        out: list[RawRecord] = []
        errors: list[str] = []
        while len(out) < max_records:
            msg = self._consumer.poll(0)
            if msg is None:
                break
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    self._reached((msg.topic() or "", msg.partition() or 0), msg.offset())
                else:
                    errors.append(str(error))
                continue
            out.append(self._record(msg, (msg.topic() or "", msg.partition() or 0)))
        return out, errors

    def close(self) -> None:
        self._consumer.close()


def read_to_end(config: Mapping[str, Any], topic: str, timeout_s: float, what: str) -> list[RawRecord]:
    """Every record of ``topic``, oldest first per partition, up to its end as of the call.

    The one read-to-end of the agent's replays (the plan topic, the lease topic): a tail opened,
    read and closed.  :class:`TopicReadError` (``_TIMED_OUT``, which clears by itself) when the
    deadline cuts the read short, naming ``what`` the topic is.
    """
    tail = TopicTail(config, topic, timeout_s)
    try:
        raw, complete = tail.read_available(timeout_s)
    finally:
        tail.close()
    if not complete:
        raise TopicReadError(f"{what} {topic!r}: not read to its end in {timeout_s}s", "_TIMED_OUT")
    return raw
