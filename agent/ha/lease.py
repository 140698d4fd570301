"""Which agent publishes: a lease held through Kafka's own group membership, and the leader's heartbeat.

Several agents may run against one cluster; exactly one publishes.  Each
subscribes, in the consumer group ``ha.group_id``, to the lease topic, which
has a single partition: the group gives that partition to one member at a
time, and that member leads.  A leader that dies stops heartbeating and the
group coordinator hands the partition to another agent after
``ha.session_timeout_s`` (plus one rebalance); a leader that stops cleanly
leaves the group and hands it over at once.

Before every batch it publishes, the leader *confirms* the lease by
committing the lease partition's offset as a member of the group: the
coordinator refuses the commit of a member that was removed (a new
generation, an unknown member), so an agent that lost the lease without
noticing (a long pause, a partition from the coordinator) learns it before
publishing, not after.  What remains is the window between a confirmation and
the publish it guards (milliseconds, unless the process stalls exactly
there); plan generations and followers' generation fencing keep even that
from moving a generation backwards.

The leader also writes a heartbeat record (key ``leader``) to the lease topic
every poll interval, on a thread of its own (:mod:`rackplan.agent.ha.heartbeat`):
agent id, leadership epoch (one more than the last heartbeat's, so epochs
never go backwards across takeovers) and poll interval.  Plan
followers read it to tell a live agent from a gone one, whether or not
several agents run.  The record codec: :mod:`rackplan.agent.protocol.lease`
(imported from there, not through this module); values: docs/lease-schema.json.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..core.errors import AgentError, CannotRun
from ..core.logging import with_kafka_logger
from ..kafka.errors import error_name, membership_lost, session_timeout_refused
from ..kafka.exceptions import PublishError
from ..kafka.tail import RawRecord, read_to_end
from ..protocol.lease import (
    Heartbeat,
    HeartbeatError,
    decode_heartbeat,
)
from ..protocol.mac import MAC_HEADER, check_mac
from ..protocol.records import RecordError
from ..settings.ha import HaSettings

__all__ = [
    "LEASE_PARTITIONS",
    "Lease",
    "LeaseLost",
    "LeaseUnconfirmed",
    "default_agent_id",
    "foreign_writer",
    "heartbeat_live",
    "last_heartbeat",
    "lease_orphaned",
]

LEASE_PARTITIONS = 1


class LeaseLost(AgentError):
    """This agent no longer holds the lease: it must stop publishing."""


class LeaseUnconfirmed(PublishError):
    """The lease could not be confirmed now (coordinator unreachable): publish nothing, try again later."""


def default_agent_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def heartbeat_live(hb: Heartbeat | None, now_ms: int, grace_ms: int = 0) -> bool:
    """Whether ``hb`` shows its writer alive: for three of its intervals (at least 10 s) plus ``grace_ms``,
    unless it released the lease on a clean stop."""
    if hb is None or hb.released:
        return False
    return hb.age_ms(now_ms) <= max(3_000 * hb.interval_s, 10_000) + grace_ms


def lease_orphaned(hb: Heartbeat | None, now_ms: int, session_timeout_s: float) -> bool:
    """Whether no agent can be holding the lease: the newest heartbeat is absent, released, or older than
    a live writer's grace plus the group's session timeout (by then the coordinator has evicted a dead
    holder).  A standby that has waited long for a lease nobody holds rejoins the group
    (:meth:`Lease.rejoin`)."""
    return not heartbeat_live(hb, now_ms, grace_ms=int(session_timeout_s * 1000))


def foreign_writer(hb: Heartbeat | None, agent_id: str, lease_group: str | None, now_ms: int) -> str | None:
    """Why ``hb`` shows another agent publishing on these topics now, or None.

    Agents of one lease group take over from each other (the lease decides who
    publishes); any other live writer is foreign: an agent without a lease, or
    one of another group, started with other settings on the same topics.  It
    would tombstone and overwrite this agent's plans and move epochs backwards.
    A heartbeat counts as live for three of its writer's intervals (at least
    10 s), unless its writer released it on a clean stop.
    """
    if hb is None or hb.agent_id == agent_id or hb.released:
        return None
    if lease_group is not None and hb.lease_group == lease_group:
        return None
    if not heartbeat_live(hb, now_ms):
        return None
    age_ms = hb.age_ms(now_ms)
    how = (
        f"lease group {hb.lease_group!r}"
        if hb.lease_group is not None
        else "without a lease (ha.enabled false)"
    )
    return (
        f"another agent publishes on these topics: {hb.agent_id!r} ({how}, epoch {hb.epoch}, "
        f"last heartbeat {age_ms / 1000:.1f} s ago); two agents share plan_topic and ha.lease_topic only "
        "with ha.enabled and one ha.group_id: give this one its own topics, or the same HA settings"
    )


class Lease:
    """Membership of the agents' group; :attr:`held` while this agent has the lease partition."""

    def __init__(self, config: Mapping[str, Any], ha: HaSettings, agent_id: str, log: Any) -> None:
        self.topic = ha.lease_topic
        self.agent_id = agent_id
        self.log = log
        self.held = False
        #: confirmations made: each one's commit carries its number as the offset's metadata, and so does
        #: the commit's answer (``on_commit``): the error of each answer, by that metadata
        self._sent = 0
        self._answers: dict[str, Any] = {}
        self._last_group_error: str | None = None
        #: the loop (publish guard, rebalances) and the heartbeat schedule both use the group client
        self._lock = threading.RLock()
        self._config = dict(config)
        self._ha = ha
        self._consumer = self._join()

    def _join(self) -> Any:
        """A new member of the agents' group, subscribed to the lease topic."""
        from confluent_kafka import Consumer

        ha = self._ha
        session_ms = int(ha.session_timeout_s * 1000)
        consumer = Consumer(
            with_kafka_logger(
                {
                    **self._config,
                    "group.id": ha.group_id,
                    "client.id": f"rackplan-agent-{self.agent_id}",
                    "session.timeout.ms": session_ms,
                    "heartbeat.interval.ms": max(100, session_ms // 5),
                    "max.poll.interval.ms": max(session_ms, int(ha.max_cycle_s * 1000)),
                    "partition.assignment.strategy": "cooperative-sticky",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "latest",
                    "on_commit": self._on_commit,
                }
            )
        )
        consumer.subscribe(
            [self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_revoke
        )
        return consumer

    def rejoin(self) -> None:
        """Leave the group and join it again as a new member, so the group's leader assigns afresh.

        Why: librdkafka's group leader can give a just-created lease topic's partition to nobody (the
        coordinator answered its assignment-time metadata request with UNKNOWN_TOPIC_OR_PART while its
        cached subscription already counted one partition), and it never rebalances by itself, since the
        partition count it watches does not change: every agent would stand by for good.  Seen on the
        real cluster (the lease topic created 1.3 s before the join; CI, 1 run in 4).
        """
        with self._lock:
            self.held = False
            self._consumer.close()
            self._consumer = self._join()

    def _ours(self, parts: list[Any]) -> bool:
        return any(p.topic == self.topic and p.partition == 0 for p in parts)

    def _on_assign(self, _consumer: Any, parts: list[Any]) -> None:
        # Cooperative protocol: only what is added is listed, and a leader keeps the lease when agents join.
        if self._ours(parts):
            self.held = True
            self.log.info("lease acquired", agent_id=self.agent_id, topic=self.topic)

    def _on_revoke(self, _consumer: Any, parts: list[Any]) -> None:
        if self._ours(parts) and self.held:
            self.held = False
            self.log.warning("lease lost", agent_id=self.agent_id, topic=self.topic)

    def _on_commit(self, err: Any, parts: list[Any]) -> None:
        for p in parts:
            if p.topic == self.topic:
                self._answers[p.metadata or ""] = err

    def poll(self, timeout_s: float = 0.0) -> bool:
        """Serve the group protocol (rebalances); True while the lease is held."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                msg = self._consumer.poll(max(0.0, min(0.05, deadline - time.monotonic())))
            if msg is not None and msg.error() is not None:
                self._group_error(msg.error())
            if time.monotonic() >= deadline:
                return self.held

    def _group_error(self, err: Any) -> None:
        """An error of the group protocol (no access to the group, a coordinator loading): logged once per
        distinct error, or the agent would stand by in silence forever.

        A session timeout the brokers refuse is :class:`CannotRun` naming ``ha.session_timeout_s``: every
        join is refused alike, so the agent stood by for good, with no leader (found by a hunt: 2 s on
        brokers whose floor is 6 s).
        """
        error = str(err)
        if session_timeout_refused(err):
            raise CannotRun(
                f"ha.session_timeout_s {self._ha.session_timeout_s:g} is refused by the brokers ({error}): "
                "set it within their group.min.session.timeout.ms and group.max.session.timeout.ms "
                "(6 s and 30 min by default)"
            )
        if error != self._last_group_error:
            self._last_group_error = error
            self.log.error("lease group error; the lease cannot be acquired while it lasts", error=error)

    def confirm(self, timeout_s: float) -> None:
        """Prove the lease is still ours: a commit as a member of the current generation.

        :class:`LeaseLost` when the group no longer has us holding it;
        :class:`LeaseUnconfirmed` when it cannot tell in ``timeout_s``.
        """
        with self._lock:  # one confirmation at a time: each waits for its own commit's answer
            self._confirm(timeout_s)

    def _confirm(self, timeout_s: float) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        self.poll()
        if not self.held:
            raise LeaseLost("the lease partition is not assigned to this agent")
        self._sent += 1
        # The answer to the commit of an earlier confirmation that timed out may come first: it says the
        # lease was held then, not now.  Only the answer naming this commit counts.
        tag = f"rackplan-lease-confirmation-{self._sent}"
        self._answers.clear()
        try:
            self._consumer.commit(offsets=[TopicPartition(self.topic, 0, 0, metadata=tag)], asynchronous=True)
        except KafkaException as e:
            self._judge(e.args[0] if e.args else e)
        deadline = time.monotonic() + timeout_s
        while tag not in self._answers:
            if time.monotonic() >= deadline:
                raise LeaseUnconfirmed(f"lease not confirmed within {timeout_s}s")
            self._consumer.poll(0.02)
        error = self._answers.pop(tag)
        if error is not None:
            self._judge(error)
        if not self.held:
            raise LeaseLost("the lease was revoked while it was being confirmed")

    def _judge(self, err: Any) -> None:
        # ``held`` follows the assignment callbacks only: after a refusal the client rejoins the group and
        # learns what it holds; an agent leads again only once a confirmation succeeds.
        name = error_name(err)
        if membership_lost(name):  # a rebalance in progress only postpones publishing
            raise LeaseLost(f"lease commit refused: {name}")
        raise LeaseUnconfirmed(f"lease commit failed: {name}")

    def acquire(self, timeout_s: float) -> bool:
        """True once the lease partition is assigned to us and a confirmation succeeded."""
        if not self.poll(0.2):
            return False
        try:
            self.confirm(timeout_s)
        except (LeaseLost, LeaseUnconfirmed) as e:
            self.log.info("lease assigned but not confirmed yet", reason=str(e))
            self.poll(0.5)
            return False
        return True

    def close(self) -> None:
        """Leave the group: another agent gets the lease at once."""
        with self._lock:
            self.held = False
            self._consumer.close()


def last_heartbeat(
    config: Mapping[str, Any],
    topic: str,
    timeout_s: float,
    log: Any,
    skipped: Callable[[str], None] | None = None,
    secret: bytes | None = None,
) -> Heartbeat | None:
    """The newest well-formed heartbeat on the lease topic (its epoch is the one to continue from).

    Malformed records are skipped with a logged reason and ``skipped(reason)``; with a ``secret``,
    so is a heartbeat without its valid MAC (:mod:`rackplan.agent.protocol.mac`): a forged
    epoch is never continued.
    """
    raw = read_to_end(config, topic, timeout_s, "lease topic")
    best: Heartbeat | None = None
    for r in raw:
        try:
            hb = heartbeat_of(r, topic, secret)
        except HeartbeatError as e:
            log.warning("lease record skipped", reason=str(e), partition=r.partition, offset=r.offset)
            if skipped is not None:
                skipped(e.reason)
            continue
        best = newest_heartbeat(best, hb)
    return best


def heartbeat_of(r: RawRecord, topic: str, secret: bytes | None) -> Heartbeat:
    """A lease-topic record as a heartbeat dated by its broker timestamp; :class:`HeartbeatError` when it
    is none, or (with a ``secret``) lacks its valid MAC."""
    try:
        check_mac(secret, topic, r.key, r.value, r.header(MAC_HEADER), "heartbeat")
    except RecordError as e:
        raise HeartbeatError(str(e), e.reason) from None
    return dataclasses.replace(decode_heartbeat(r.key, r.value), seen_ms=r.timestamp_ms)


def newest_heartbeat(best: Heartbeat | None, hb: Heartbeat) -> Heartbeat:
    """The heartbeat to go by of two: the higher epoch, the later one of equal epochs (topic order)."""
    return hb if best is None or hb.epoch >= best.epoch else best
