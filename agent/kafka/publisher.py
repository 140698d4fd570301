"""Publishing with confirmation: an idempotent producer, and a transactional one for the plan topic.

Every client made here routes librdkafka's logs through structlog
(:func:`rackplan.agent.core.logging.with_kafka_logger`); their poll calls serve the logs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.logging import with_kafka_logger
from ..protocol.mac import MAC_HEADER, record_mac
from .errors import delivery_uncertain, publisher_fenced, too_large
from .exceptions import DeliveryUncertain, PlanTooLargeError, ProducerFenced, PublishError

#: record header naming the agent that wrote a record (plans, tombstones, heartbeats, alerts)
WRITER_HEADER = "rackplan-agent"
#: record header naming the writer's lease group (``ha.group_id``), empty without a lease
LEASE_GROUP_HEADER = "rackplan-lease-group"


def _kafka_cause(e: BaseException) -> BaseException:
    """The KafkaException behind ``e``: confluent-kafka raises a fatal error that arrives while a delivery
    callback runs as a SystemError ("returned a result with an exception set") caused by it (seen on real
    Kafka when a newer agent fences the plan producer)."""
    if isinstance(e, SystemError) and e.__cause__ is not None:
        return e.__cause__
    return e


def transactional_id(group_id: str, plan_topic: str) -> str:
    """The plan publisher's transactional.id: one per lease group and plan topic, so every agent that may
    take over from another shares it, and the broker fences the previous holder when the next one starts
    publishing (Kafka's producer epochs), with or without the lease."""
    return f"rackplan-{group_id}-{plan_topic}"


def _delivery_error(key: str, topic: str, err: Any) -> PublishError:
    """The exception a failed delivery report stands for."""
    name = getattr(err, "name", lambda: "")()
    if too_large(name):
        return PlanTooLargeError(f"{key}: plan exceeds the topic's max.message.bytes: {err}")
    cls = DeliveryUncertain if delivery_uncertain(name) else PublishError
    return cls(f"{key}: record to {topic} failed: {err}")


class Publisher:
    """Idempotent, acks=all, zstd producer; :meth:`publish` returns once the broker confirmed.

    With ``transactional_id``, records to ``fenced_topics`` (the plan topic) go through a second,
    transactional producer: each :meth:`publish_many` to them is one transaction, committed before it
    returns.  Transactions are initialised on the first such publish (not before: an agent that refuses
    to start must not fence the one running), and from then on a newer producer with the same id fences
    this one: :class:`ProducerFenced`, and none of its uncommitted records reach a read_committed reader.
    Heartbeats and alerts stay on the plain producer, never blocked by a transaction.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        max_message_bytes: int,
        headers: Sequence[tuple[str, bytes]] = (),
        transactional_id: str | None = None,
        fenced_topics: Sequence[str] = (),
        transaction_timeout_s: float = 60.0,
        secret: bytes | None = None,
    ) -> None:
        """``headers`` go on every record: who wrote it.  With ``secret`` every record also carries its
        MAC (:mod:`rackplan.agent.protocol.mac`): what readers holding the secret judge it by."""
        from confluent_kafka import Producer

        self._headers: list[tuple[str, str | bytes | None]] = list(headers)
        self._secret = secret

        conf: dict[str, Any] = {
            **config,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": "zstd",
            "message.max.bytes": max_message_bytes,
            "linger.ms": 5,
        }
        self._producer = Producer(with_kafka_logger(conf))
        self.max_message_bytes = max_message_bytes
        self.transactional_id = transactional_id
        self._fenced_topics = frozenset(fenced_topics) if transactional_id is not None else frozenset()
        self._txn: Any = None
        self._txn_conf: dict[str, Any] = {
            **conf,
            "transactional.id": transactional_id,
            # an agent stalled inside a transaction holds back read_committed readers at most this long
            "transaction.timeout.ms": max(1000, int(transaction_timeout_s * 1000)),
        }
        #: a commit or abort whose outcome is unknown: librdkafka wants it called again (before the next begin)
        self._pending: str | None = None
        #: why this publisher was fenced, once it was: it never publishes to ``fenced_topics`` again
        self.fenced: str | None = None

    def _record_headers(
        self, topic: str, key: str, value: bytes | None
    ) -> list[tuple[str, str | bytes | None]] | None:
        """The writer headers, and the record's MAC when a secret is set."""
        if self._secret is None:
            return self._headers or None
        return [*self._headers, (MAC_HEADER, record_mac(self._secret, topic, key.encode(), value))]

    def _fence(self, detail: str) -> ProducerFenced:
        self.fenced = detail
        return ProducerFenced(
            f"plan producer fenced: another agent with transactional.id {self.transactional_id!r} "
            f"publishes now ({detail})"
        )

    def _transactional(self, timeout_s: float) -> Any:
        """The transactional producer, initialised on first use (InitProducerId bumps the epoch: fences others)."""
        from confluent_kafka import KafkaException, Producer

        if self.fenced is not None:
            raise self._fence(self.fenced)
        if self._txn is None:
            producer = Producer(with_kafka_logger(self._txn_conf))
            try:
                producer.init_transactions(timeout_s)
            except KafkaException as e:
                if publisher_fenced(e):
                    raise self._fence(f"init: {e}") from e
                # retriable (coordinator loading, timeout): a later call starts over
                raise PublishError(f"transactions not initialised: {e}") from e
            self._txn = producer
        return self._txn

    def _txn_failed(self, e: BaseException, timeout_s: float, during: str = "commit") -> Exception:
        """A transaction call (``during``: begin, commit or abort) failed: the error to raise.

        Fenced (fatal): :class:`ProducerFenced`.  An abortable error: aborted, nothing of it is visible to
        read_committed readers (:class:`PublishError`).  A commit whose outcome is unknown may still
        complete (:class:`DeliveryUncertain`): it is called again before the next transaction, as is an
        abort that did not complete (that transaction can only be aborted: not visible, PublishError).
        """
        from confluent_kafka import KafkaException

        err = e.args[0] if e.args else None
        if publisher_fenced(e):
            return self._fence(str(e))
        if during == "abort":
            self._pending = "abort"
            return PublishError(f"transaction abort not completed (retried next time): {e}")
        if bool(getattr(err, "txn_requires_abort", lambda: False)()):
            try:
                self._txn.abort_transaction(timeout_s)
            except KafkaException as abort_error:
                return self._txn_failed(abort_error, timeout_s, "abort")
            return PublishError(f"transaction aborted: {e}")
        if during == "begin":
            return PublishError(f"transaction not begun: {e}")
        self._pending = "commit"
        return DeliveryUncertain(f"transaction outcome unknown: {e}")

    def _reraise_fenced(self, e: BaseException, transactional: bool) -> None:
        """After ``poll``/``flush`` raised: :class:`ProducerFenced` for a transactional producer's fatal
        error; a Kafka error otherwise passes (the delivery reports say what became of each record), and
        so does a transactional producer's SystemError (seen on real Kafka when fenced); the rest again."""
        from confluent_kafka import KafkaException

        cause = _kafka_cause(e)
        if transactional and publisher_fenced(cause):
            raise self._fence(str(cause)) from e
        if isinstance(cause, KafkaException):
            return
        if transactional and isinstance(e, SystemError):
            # confluent-kafka lost the fatal error it meant to raise ("returned NULL without setting an
            # exception"): the records count as unconfirmed, the transaction is aborted, and the abort
            # raises the fence itself.
            return
        raise e

    def publish(self, topic: str, key: str, value: bytes | None, timeout_s: float) -> None:
        """Send one record and wait for its delivery report."""
        self.publish_many(topic, [(key, value)], timeout_s)

    def publish_many(self, topic: str, records: list[tuple[str, bytes | None]], timeout_s: float) -> None:
        """Send records and wait for every delivery report; raise if any failed.

        To a fenced topic: one transaction, committed (all records visible) or not at all.
        """
        outcomes = self.publish_each(topic, records, timeout_s)
        failed = [(records[i][0], e) for i, e in enumerate(outcomes) if e is not None]
        if not failed:
            return
        first_key, first = failed[0]
        if len(failed) == 1 or isinstance(first, PlanTooLargeError):
            raise first
        uncertain = any(isinstance(e, DeliveryUncertain) for _, e in failed)
        raise (DeliveryUncertain if uncertain else PublishError)(
            f"{len(failed)} record(s) to {topic} failed, first {first_key}: {first}"
        )

    def publish_each(
        self, topic: str, records: list[tuple[str, bytes | None]], timeout_s: float
    ) -> list[PublishError | None]:
        """Send every record, then wait (``timeout_s`` in all) for their delivery reports: one outcome each.

        None: confirmed.  :class:`PlanTooLargeError`: refused for its size;
        :class:`DeliveryUncertain`: no report in time, or a timeout after
        which it may be on the topic all the same; :class:`PublishError`:
        refused.  One round trip for all of them, not one per record: a
        change that republishes hundreds of plans waits for the brokers once.
        To a fenced topic the batch is one transaction: every record
        confirmed (committed), or every one failed (aborted: none visible to
        read_committed readers; or a commit of unknown outcome: all
        uncertain).  A fence raises :class:`ProducerFenced`, never an outcome.
        """
        if topic not in self._fenced_topics:
            return self._publish_on(self._producer, topic, records, timeout_s)
        try:
            return self._publish_transaction(topic, records, timeout_s)
        except ProducerFenced:
            raise
        except PublishError as e:
            return [e] * len(records)

    def _publish_transaction(
        self, topic: str, records: list[tuple[str, bytes | None]], timeout_s: float
    ) -> list[PublishError | None]:
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + timeout_s
        producer = self._transactional(timeout_s)
        if self._pending is not None:
            pending, self._pending = self._pending, None
            try:
                if pending == "commit":
                    producer.commit_transaction(timeout_s)
                else:
                    producer.abort_transaction(timeout_s)
            except KafkaException as e:
                raise self._txn_failed(e, timeout_s, pending) from e
        try:
            producer.begin_transaction()
        except KafkaException as e:
            raise self._txn_failed(e, timeout_s, "begin") from e
        outcomes = self._publish_on(producer, topic, records, max(0.1, deadline - time.monotonic()))
        failed = [e for e in outcomes if e is not None]
        if failed:
            try:
                producer.abort_transaction(timeout_s)
            except KafkaException as abort_error:
                raise self._txn_failed(abort_error, timeout_s, "abort") from failed[0]
            if self.fenced is not None:
                raise self._fence(self.fenced) from failed[0]
            # Aborted: nothing of it is visible to read_committed readers, so nothing is uncertain.
            aborted = PublishError(f"transaction aborted: {failed[0]}")
            return [e if isinstance(e, PlanTooLargeError) else aborted for e in outcomes]
        try:
            producer.commit_transaction(max(0.5, deadline - time.monotonic()))
        except KafkaException as e:
            raise self._txn_failed(e, timeout_s) from e
        return outcomes

    def _publish_on(
        self, producer: Any, topic: str, records: list[tuple[str, bytes | None]], timeout_s: float
    ) -> list[PublishError | None]:
        from confluent_kafka import KafkaException

        transactional = producer is self._txn
        outcomes: list[PublishError | None] = [None] * len(records)
        #: delivery reports, judged after flush: the callback only stores (a fatal error may already be
        #: pending in confluent-kafka while it runs, and any call that checks or clears it misreports it)
        results: dict[int, Any] = {}

        def report(i: int) -> Callable[[Any, Any], None]:
            def cb(err: Any, _msg: Any) -> None:
                results[i] = err

            return cb

        waiting: list[int] = []
        for i, (key, value) in enumerate(records):
            try:
                producer.produce(
                    topic,
                    key=key.encode(),
                    value=value,
                    on_delivery=report(i),
                    headers=self._record_headers(topic, key, value),
                )
            except KafkaException as e:
                if transactional and publisher_fenced(e):
                    raise self._fence(str(e)) from e
                if too_large(e):
                    outcomes[i] = PlanTooLargeError(
                        f"{key}: {len(value or b'')} bytes exceed message.max.bytes {self.max_message_bytes}"
                    )
                else:
                    outcomes[i] = PublishError(f"{key}: {e}")
                continue
            except BufferError as e:
                outcomes[i] = PublishError(f"{key}: producer queue full: {e}")
                continue
            waiting.append(i)
            try:
                producer.poll(0)
            except (KafkaException, SystemError) as e:
                self._reraise_fenced(e, transactional)
        deadline = time.monotonic() + timeout_s
        while not results.keys() >= set(waiting):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                producer.flush(min(left, 1.0))
            except (KafkaException, SystemError) as e:
                self._reraise_fenced(e, transactional)
                break
        for i in waiting:
            if i not in results:
                outcomes[i] = DeliveryUncertain(f"{records[i][0]}: record to {topic} not confirmed in time")
            elif (err := results[i]) is not None:
                if transactional and publisher_fenced(err):
                    raise self._fence(str(err))
                outcomes[i] = _delivery_error(records[i][0], topic, err)
        return outcomes

    def send(self, topic: str, key: str, value: bytes, on_result: Callable[[str | None], None]) -> None:
        """Send one record without waiting: ``on_result`` gets None or the error, from a later :meth:`poll`."""
        from confluent_kafka import KafkaException

        def cb(err: Any, _msg: Any) -> None:
            on_result(None if err is None else str(err))

        try:
            self._producer.produce(
                topic,
                key=key.encode(),
                value=value,
                on_delivery=cb,
                headers=self._record_headers(topic, key, value),
            )
        except (KafkaException, BufferError) as e:
            on_result(str(e))
        self._producer.poll(0)

    def poll(self) -> None:
        """Serve delivery reports and librdkafka's logs without waiting."""
        from confluent_kafka import KafkaException

        self._producer.poll(0)
        if self._txn is not None and self.fenced is None:
            try:
                self._txn.poll(0)
            except KafkaException as e:  # fenced between publishes: the next plan-topic publish says so
                if publisher_fenced(e):
                    self._fence(str(e))

    def flush(self, timeout_s: float) -> int:
        remaining: int = self._producer.flush(timeout_s)
        return remaining
