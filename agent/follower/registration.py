"""The follower's registration record: published when it changes, refreshed every TTL / 3, never waited for.

The record (``consumer/<group>/<instance>``, ``follower: {released_generation,
mode}``) is how the agent sees this member at all, and how it learns in a
two-phase handover that a partition is free.  Its delivery reports decide
whether the member may keep reading: unconfirmed for too long, the agent may
expire it.  A refusal by the brokers (no Write right) is an answer, not
silence: it is counted and logged once, and never fences the member.
"""

from __future__ import annotations

import collections
import contextlib
from dataclasses import dataclass, field
from typing import Any

from ..core.ports import Clock, FollowerProducer, Logger, ProducerFactory
from ..kafka.errors import (
    error_name,
    fatal_cause_unnamed,
    unknown_topic,
    unusable_producer,
    write_refused,
)
from ..protocol.registrations import FollowerStatus, consumer_registration
from .settings import Identity, PlanFollowerSettings

#: how soon a producer that believes the registrations topic is gone (librdkafka keeps believing it until
#: its next metadata refresh) is replaced by one with fresh metadata (not at every poll: the topic may
#: really be gone)
RENEW_AFTER_MS = 1_000


@dataclass
class Registrar:
    """Publishes this member's registration and remembers the brokers' answers (wall-clock ms)."""

    who: Identity
    settings: PlanFollowerSettings
    client_config: dict[str, Any]
    new_producer: ProducerFactory
    wall: Clock
    log: Logger
    stats: collections.Counter[str]
    producer: FollowerProducer = field(init=False)
    #: the producer hit a fatal error (e.g. no right to an idempotent producer id): replaced when due
    broken: bool = False
    #: when the last record was made, and the newest one the brokers confirmed
    sent_ms: int = 0
    confirmed_ms: int = 0
    #: the newest registration the brokers refused (ACLs): alive, but not registered
    refused_ms: int = 0
    #: the status the last record carried
    status: FollowerStatus | None = None
    #: a producer that believes the topic gone is replaced no sooner than this (wall-clock ms)
    renew_at_ms: int = 0

    def __post_init__(self) -> None:
        self.producer = self._producer()
        self.confirmed_ms = self._now_ms()

    def _now_ms(self) -> int:
        return int(self.wall() * 1000)

    def _producer(self) -> FollowerProducer:
        return self.new_producer(
            {**self.client_config, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
        )

    def answered_ms(self) -> int:
        """The newest answer of the brokers to a registration: a confirmation or a refusal."""
        return max(self.confirmed_ms, self.refused_ms)

    def record(self, status: FollowerStatus) -> tuple[str, bytes]:
        """This member's registration (key, value), dated now and signed when a secret is set."""
        w, s = self.who, self.settings
        return consumer_registration(
            w.group_id,
            w.member_id,
            rack=w.rack,
            topics=w.topics,
            timestamp_ms=self._now_ms(),
            group_instance_id=w.member_id,
            assignor=s.assignor,
            fetch_mode=s.fetch_mode,
            objective=s.objective,
            balance=s.balance,
            balance_floor=s.balance_floor,
            follower=status,
            secret=w.secret,
        )

    def poll(self) -> None:
        """Serve delivery reports; a fatal producer error is counted, never raised into the application."""
        from confluent_kafka import KafkaException

        if self.broken:
            return
        try:
            self.producer.poll(0)
        except KafkaException as e:
            self.failed(e.args[0] if e.args else e, self._now_ms())

    def failed(self, err: Any, made_ms: int) -> None:
        """A registration not delivered; the brokers' refusal (ACLs) is remembered as an answer."""
        self.stats["registrations_failed"] += 1
        name = error_name(err)
        if unusable_producer(err):
            self.broken = True  # librdkafka: a fatal producer cannot be used again
        if unknown_topic(name) and not self.broken:
            self.broken = True
            self.renew_at_ms = self._now_ms() + RENEW_AFTER_MS
        if not write_refused(name):  # the brokers' answer (no Write right), not silence
            return
        self.stats["registrations_refused"] += 1
        self.refused_ms = max(self.refused_ms, made_ms)
        if self.stats["registrations_refused"] == 1:
            self.log.warning(
                "registration refused by the brokers (no Write right on the registrations topic): "
                "the agent cannot see this member; following plans that name it",
                error=name,
                topic=self.settings.registrations_topic,
            )

    def register(self, status: FollowerStatus, force: bool = False) -> None:
        """Publish the registration when it changed, or to refresh it (every TTL / 3); never waits."""
        from confluent_kafka import KafkaException

        now_ms = self._now_ms()
        due = now_ms - self.sent_ms >= self.settings.registration_ttl_s * 1000 / 3
        if not (force or due or status != self.status):
            return
        if self.broken:
            if not due or now_ms < self.renew_at_ms:
                return
            with contextlib.suppress(KafkaException):
                self.producer.purge()
            self.producer = self._producer()
            self.broken = False
            self.stats["registration_producers_renewed"] += 1
        key, value = self.record(status)

        def delivered(err: Any, _msg: Any, made_ms: int = now_ms) -> None:
            if err is None:
                self.confirmed_ms = max(self.confirmed_ms, made_ms)
            else:
                self.failed(err, made_ms)

        try:
            self.producer.produce(
                self.settings.registrations_topic, key=key.encode(), value=value, on_delivery=delivered
            )
        except (BufferError, KafkaException) as e:
            err = e.args[0] if isinstance(e, KafkaException) and e.args else e
            self.failed(self._fatal_cause(err) if fatal_cause_unnamed(err) else err, now_ms)
            if not self.broken:
                self.log.warning("registration not sent", error=str(e))
            return
        self.sent_ms = now_ms
        self.status = status
        self.poll()

    def _fatal_cause(self, err: Any) -> Any:
        """Why the producer turned fatal, served from its queue now, else ``err`` (``_FATAL``) itself.

        The idempotent producer turns fatal on its own thread: a second record
        made before the next poll meets only ``_FATAL``.  Left unserved, the
        cause (the brokers' refusal, an answer) was learnt one refresh later,
        from the next producer: with test_kafka_acls's 4 s TTL once (CI) past
        2/3 of the TTL, so the follower fenced itself for want of an answer
        its first producer already had.
        """
        from confluent_kafka import KafkaException

        try:
            self.producer.poll(0)
        except KafkaException as e:
            return e.args[0] if e.args else err
        return err

    def unregister(self, status: FollowerStatus) -> None:
        """Remove the registration (a tombstone), waiting up to ``io_timeout_s``; a failure is logged.

        The delivery reports waiting are served first, so a producer that turned fatal since the last
        poll (one just renewed, with no right to an idempotent producer id) is known to be broken and
        not flushed: confluent-kafka 2.16 raises a fatal error met *inside* ``flush`` as a
        ``SystemError``, usually caused by the ``KafkaException`` and once (CI, test_kafka_acls) with no
        cause ("exception <class 'str'> is not a BaseException subclass"): either is counted here like
        the ``KafkaException``, never raised into the application's ``close``.
        """
        from confluent_kafka import KafkaException

        key, _ = self.record(status)
        self.poll()
        try:
            if not self.broken:
                self.producer.produce(self.settings.registrations_topic, key=key.encode(), value=None)
                self.producer.flush(self.settings.io_timeout_s)
        except (BufferError, KafkaException, SystemError) as e:  # SystemError: the client's, from flush
            self.broken = self.broken or isinstance(e, SystemError)
            self.stats["registrations_failed"] += 1
            self.log.warning("registration not removed", error=str(e.__cause__ or e))

    def drop(self) -> None:
        """Forget what is in flight, as a crash would (a fatal producer's error included, see :meth:`unregister`)."""
        from confluent_kafka import KafkaException

        with contextlib.suppress(
            KafkaException, SystemError
        ):  # a fatal producer's, in either form (unregister)
            self.producer.purge()
            self.producer.flush(0)
