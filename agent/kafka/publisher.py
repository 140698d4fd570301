"""Kafka I/O around the agent's topics: create, read (replay and tail), publish with confirmation.

Every client made here routes librdkafka's logs through structlog
(:func:`rackplan.agent.core.logging.with_kafka_logger`); their poll calls serve the logs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.logging import with_kafka_logger
from ..core.ports import AdminPort, Logger
from ..protocol.mac import MAC_HEADER, check_mac, record_mac
from ..protocol.plans import PlanDecodeError, PlanRecord, decode_record
from ..protocol.records import RecordError
from .errors import REFUSED, TRANSIENT, error_name, transient
from .timeouts import operation_timeout_s, result_timeout_s

_UNSUPPORTED = {
    "_UNSUPPORTED_FEATURE",
    "UNSUPPORTED_VERSION",
    "INVALID_REQUEST",
    "CLUSTER_AUTHORIZATION_FAILED",
}


#: record header naming the agent that wrote a record (plans, tombstones, heartbeats, alerts)
WRITER_HEADER = "rackplan-agent"
#: record header naming the writer's lease group (``ha.group_id``), empty without a lease
LEASE_GROUP_HEADER = "rackplan-lease-group"


class PublishError(RuntimeError):
    """A record was not confirmed by the brokers."""


class DeliveryUncertain(PublishError):
    """A record was sent but its fate is unknown (no delivery report in time, or a timeout that may
    have persisted it): it may still appear on the topic.  A plan's generation is then never reused
    with another content (see :meth:`rackplan.agent.state.plan_book.PlanBook.reserve`)."""


#: delivery errors after which the record may be on the topic all the same
_UNCERTAIN = frozenset({"_MSG_TIMED_OUT", "_TIMED_OUT", "REQUEST_TIMED_OUT", "_PURGE_INFLIGHT"})


class ProducerFenced(Exception):
    """Another producer with this publisher's ``transactional.id`` initialised after it: a newer agent
    publishes now.  This producer can never publish again (its open transaction was aborted, so none of
    its records reach read_committed readers); the agent stops publishing and steps down.  Not a
    :class:`PublishError`: no retry can succeed, so it must not be caught as one."""


#: transaction errors meaning a newer producer of the same transactional.id took over
_FENCED_ERRORS = frozenset({"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"})


def _fatal(e: BaseException | Any) -> bool:
    """A fatal producer error, or one naming a fence (the KafkaError itself or a KafkaException around it)."""
    err = e.args[0] if isinstance(e, BaseException) and e.args else e
    name = getattr(err, "name", None)
    fatal = getattr(err, "fatal", None)
    return (callable(name) and name() in _FENCED_ERRORS) or (callable(fatal) and bool(fatal()))


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


class PlanTooLargeError(PublishError):
    """A plan exceeds the producer's or topic's maximum message size even compressed."""


def _delivery_error(key: str, topic: str, err: Any) -> PublishError:
    """The exception a failed delivery report stands for."""
    name = getattr(err, "name", lambda: "")()
    if name in ("MSG_SIZE_TOO_LARGE", "MESSAGE_TOO_LARGE"):
        return PlanTooLargeError(f"{key}: plan exceeds the topic's max.message.bytes: {err}")
    cls = DeliveryUncertain if name in _UNCERTAIN else PublishError
    return cls(f"{key}: record to {topic} failed: {err}")


class TopicReadError(PublishError):
    """A topic could not be read (missing, unavailable, or not to its end in time).

    ``kafka_error`` names the Kafka error behind it (``_TIMED_OUT`` for a read cut short), so that
    start-up can tell one that clears by itself (:func:`rackplan.agent.kafka.errors.transient`).
    """

    def __init__(self, message: str, kafka_error: str = "") -> None:
        super().__init__(message)
        self.kafka_error = kafka_error


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
    admin: AdminPort, specs: list[TopicSpec], timeout_s: float, log: Logger, fallback: str | None = None
) -> list[TopicSpec]:
    """Create missing topics with CreateTopics; returns those still missing.

    ``fallback`` names another way the caller will create them (the embedded
    cluster's mock API): a refusal is then routine and logged at info, without
    the by-hand command.  Otherwise it is logged with the exact command to run.
    """
    from confluent_kafka.cimpl import NewTopic

    existing = set(admin.list_topics(timeout=timeout_s).topics)
    missing = [s for s in specs if s.name not in existing]
    if not missing:
        return []
    futures = admin.create_topics(
        [NewTopic(s.name, s.partitions, config=dict(s.config)) for s in missing],
        request_timeout=operation_timeout_s(timeout_s),
    )
    still: list[TopicSpec] = []
    created: list[str] = []
    for s in missing:
        try:
            futures[s.name].result(timeout=result_timeout_s(timeout_s))
            log.info("topic created", topic=s.name, partitions=s.partitions, config=dict(s.config))
            created.append(s.name)
        except Exception as e:
            name = error_name(e, "")
            if name == "TOPIC_ALREADY_EXISTS":
                continue
            still.append(s)
            if fallback is not None:
                log.info(
                    f"topic missing and the brokers do not create it; creating it through {fallback}",
                    topic=s.name,
                    broker_error=name or str(e),
                )
                continue
            log.error(
                "cannot create topic; create it by hand",
                topic=s.name,
                error=str(e),
                broker_lacks_create_topics=name in _UNSUPPORTED,
                command=s.command(),
            )
    if created:
        wait_until_led(admin, created, timeout_s, log)
    return still


def wait_until_led(admin: AdminPort, topics: Sequence[str], timeout_s: float, log: Logger) -> bool:
    """Until every partition of ``topics`` has a leader in the metadata clients see.

    CreateTopics answers once the controller committed the topic; brokers learn
    it a moment later, and a reader or producer that asks in between is told
    UNKNOWN_TOPIC_OR_PART.  False (logged) when the deadline passes first.
    """
    deadline = time.monotonic() + timeout_s
    pending = list(topics)
    while True:
        try:
            md = admin.list_topics(timeout=max(0.5, deadline - time.monotonic()))
            pending = [
                t
                for t in topics
                if (tmd := md.topics.get(t)) is None
                or tmd.error is not None
                or not tmd.partitions
                or any(pm.leader < 0 for pm in tmd.partitions.values())
            ]
        except Exception as e:  # KafkaException: a transient metadata failure; the deadline decides
            log.debug("metadata not available yet", error=str(e))
        if not pending:
            return True
        if time.monotonic() >= deadline:
            log.warning("created topics have no leader yet", topics=pending, waited_s=timeout_s)
            return False
        time.sleep(0.1)


#: topic settings the agent relies on, and what breaks without them
REQUIRED_CONFIG_REASONS: Mapping[str, str] = {
    "cleanup.policy": "without compaction the topic loses every plan's last record to retention",
}


def topic_config_problems(
    admin: AdminPort, specs: Sequence[TopicSpec], timeout_s: float
) -> dict[str, str] | None:
    """What the existing topics' configuration lacks of ``specs`` (DescribeConfigs), by topic name.

    Checks that a spec asking for ``cleanup.policy=compact`` finds compaction
    on, and that ``max.message.bytes`` is at least the spec's.  None when the
    brokers cannot describe configs (librdkafka's mock cluster), so nothing is known.
    :class:`TopicReadError` for an error that clears by itself (a topic created a moment
    ago that the answering broker does not know yet): start-up asks again later
    (:mod:`rackplan.agent.runtime.startup_retry`), it is not a problem of the topic.
    """
    from confluent_kafka.admin._config import ConfigResource

    resources = {s.name: ConfigResource(ConfigResource.Type.TOPIC, s.name) for s in specs}
    try:
        futures = admin.describe_configs(
            list(resources.values()), request_timeout=operation_timeout_s(timeout_s)
        )
    except Exception:
        return None
    problems: dict[str, str] = {}
    for s in specs:
        try:
            configs = futures[resources[s.name]].result(timeout=result_timeout_s(timeout_s))
        except Exception as e:
            if error_name(e, "") in _UNSUPPORTED or "not supported" in str(e).lower():
                return None
            if transient(e):
                raise TopicReadError(
                    f"topic {s.name!r}: configuration not readable yet: {e}", error_name(e, "")
                ) from e
            problems[s.name] = f"its configuration could not be read: {e}"
            continue
        want_policy = s.config.get("cleanup.policy", "")
        have_policy = getattr(configs.get("cleanup.policy"), "value", None) or ""
        if "compact" in want_policy and "compact" not in have_policy.split(","):
            problems[s.name] = (
                f"cleanup.policy is {have_policy!r}, not compact: {REQUIRED_CONFIG_REASONS['cleanup.policy']}; "
                f"fix: kafka-configs.sh --bootstrap-server <brokers> --alter --entity-type topics "
                f"--entity-name {s.name} --add-config cleanup.policy=compact"
            )
            continue
        want_max = s.config.get("max.message.bytes")
        have_max = getattr(configs.get("max.message.bytes"), "value", None)
        if want_max is not None and have_max is not None and int(have_max) < int(want_max):
            problems[s.name] = (
                f"max.message.bytes is {have_max}, below the {want_max} plans may need; "
                f"fix: kafka-configs.sh --bootstrap-server <brokers> --alter --entity-type topics "
                f"--entity-name {s.name} --add-config max.message.bytes={want_max}"
            )
    return problems


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


def read_back(
    config: Mapping[str, Any],
    topic: str,
    timeout_s: float,
    log: Logger,
    skipped: Callable[[str], None] | None = None,
    secret: bytes | None = None,
) -> list[tuple[str, PlanRecord | None]]:
    """Every record of the plan topic, oldest first per partition, up to the current end.

    Malformed records (:func:`rackplan.agent.protocol.records.load_record` bounds them) are
    skipped with a logged reason and ``skipped(reason)``; they never stop the agent.  With a
    ``secret``, so is a record without its valid MAC (:mod:`rackplan.agent.protocol.mac`): a
    forger's plan is never the plan of record, and its generation is not ours to continue.
    """
    tail = TopicTail(config, topic, timeout_s)
    try:
        raw, complete = tail.read_available(timeout_s)
    finally:
        tail.close()
    if not complete:
        raise TopicReadError(f"plan topic {topic!r}: replay timed out after {timeout_s}s", "_TIMED_OUT")
    out: list[tuple[str, PlanRecord | None]] = []
    for r in raw:
        try:
            if r.key is None:
                raise PlanDecodeError("no key", "bad_key")
            try:
                check_mac(secret, topic, r.key, r.value, r.header(MAC_HEADER), "plan record")
            except RecordError as e:
                raise PlanDecodeError(str(e), e.reason) from None
            rec = decode_record(r.key, r.value)
        except PlanDecodeError as e:
            log.warning("plan record skipped", reason=str(e), partition=r.partition, offset=r.offset)
            if skipped is not None:
                skipped(e.reason)
            continue
        out.append((r.key.decode("utf-8"), rec))
    return out


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
                if _fatal(e):
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
        if _fatal(e):
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
        if transactional and _fatal(cause):
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
                if transactional and _fatal(e):
                    raise self._fence(str(e)) from e
                if error_name(e, "") == "MSG_SIZE_TOO_LARGE":
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
                if transactional and _fatal(err):
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
                if _fatal(e):
                    self._fence(str(e))

    def flush(self, timeout_s: float) -> int:
        remaining: int = self._producer.flush(timeout_s)
        return remaining
