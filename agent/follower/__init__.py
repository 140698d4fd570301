"""``PlanFollower``: a confluent-kafka Consumer that reads the partitions rackplan's plan gives it.

An application that wants rackplan's rack-aware assignment instead of the
broker-side one wraps its consumer::

    follower = PlanFollower(
        {"bootstrap.servers": "...", "group.id": "payments", "client.rack": "az-a"},
        topics=["orders"], instance_id="payments-az-a-1",
    )
    while running:
        msg = follower.poll(1.0)
        ...
    follower.close()

What it does (docs/followers.md has the whole protocol):

* **Registers** on the registrations topic (``consumer/<group>/<instance>``,
  the agent's record format with ``follower: true``): group, stable instance
  id (its member id in plans), ``client.rack``, topics; and re-publishes the
  record every ``registration_ttl_s / 3``.
* **Follows** its group's key on the plan topic: partitions are assigned by
  hand (``incremental_assign`` / ``incremental_unassign``); a partition given
  up is committed first.  A plan's generation must exceed every generation
  seen before (stale and replayed-out-of-order plans are ignored), and after
  applying plan *g* the member's record says ``released_generation: g``: how
  the agent learns, in a two-phase handover, that a partition is free.
* Before reading a new partition it commits the partition's starting offset
  as a plain (group-less) commit.  Kafka accepts such a commit only while the
  group has no members using group subscription, so the commit doubles as a
  fence: a follower never reads a partition that a subscribed consumer of the
  same group might hold.  Periodic commits are fenced the same way.
* **Falls back** to ordinary group subscription, with a logged warning, when
  no plan that includes it arrives within ``plan_timeout_s``, or the agent's
  heartbeat (on the lease topic) is older than ``agent_timeout_s``.  It first
  releases its partitions and waits ``fallback_grace_s``, so that every other
  follower notices the same silence and releases too.  When the agent is back
  and publishes a newer plan, it leaves the group and follows the plan again.
* **Fences itself**: a follower whose registration has not been confirmed by
  the brokers for 2/3 of the TTL stops reading (the agent will soon expire it
  and give its partitions away) until a refresh is confirmed.  A registration
  the brokers *refuse* (no Write right on the registrations topic) is an
  answer, not silence: it is logged once and counted
  (``registrations_refused``), the follower does not fence itself for it, and
  it keeps following every plan that names it (a group of the agent's settings
  file); the agent cannot see such a member, so a group made of registrations
  never names it and it falls back after ``plan_timeout_s``.

Everything happens inside :meth:`PlanFollower.poll`: no background thread of
its own, no message returned before the checks above ran.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.logging import get_logger, with_kafka_logger
from ..core.ports import (
    Clock,
    ConsumerFactory,
    ControlTail,
    FollowerConsumer,
    FollowerProducer,
    Monotonic,
    ProducerFactory,
    TailFactory,
)
from ..kafka.errors import COMMIT_FENCED as FENCED  # public name: the commit errors that fence a follower
from ..kafka.tail import TopicTail
from .cycle import FollowerCycle
from .handover import PLAN, SUBSCRIPTION, WAITING
from .intake import ControlIntake
from .partitions import Partitions
from .registration import Registrar
from .settings import FollowerError, PlanFollowerSettings, checked_settings, client_config, identity

__all__ = [
    "FENCED",
    "PLAN",
    "SUBSCRIPTION",
    "TP",
    "WAITING",
    "FollowerClients",
    "FollowerError",
    "Hook",
    "PlanFollower",
    "PlanFollowerSettings",
]

TP = tuple[str, int]
#: the application's on_assign / on_revoke: the follower and the partitions (sorted) taken or given up
Hook = Callable[["PlanFollower", list[TP]], None]

#: the longest a :meth:`PlanFollower.poll` waits on the consumer between two rounds of checks
_SLICE_S = 0.05


def kafka_consumer(config: dict[str, Any]) -> FollowerConsumer:
    from confluent_kafka import Consumer

    consumer: FollowerConsumer = Consumer(with_kafka_logger(config))
    return consumer


def kafka_producer(config: dict[str, Any]) -> FollowerProducer:
    from confluent_kafka import Producer

    producer: FollowerProducer = Producer(with_kafka_logger(config))
    return producer


def kafka_tail(config: dict[str, Any], topics: Sequence[str], timeout_s: float) -> ControlTail:
    return TopicTail(config, topics, timeout_s)


@dataclass(frozen=True)
class FollowerClients:
    """How the follower makes its Kafka clients: confluent-kafka's by default, fakes in tests
    (:mod:`rackplan.agent.testing_clients`)."""

    consumer: ConsumerFactory = kafka_consumer
    producer: ProducerFactory = kafka_producer
    tail: TailFactory = kafka_tail


class PlanFollower:
    """Consumes what rackplan's plan assigns to this instance; ordinary group subscription as a fallback.

    It wires the pieces, each with one job: :class:`ControlIntake` (the newest
    plan, the agent's liveness), :class:`Partitions` (what the consumer reads,
    fenced commits), :class:`Registrar` (the registration record and the
    brokers' answers), and :class:`FollowerCycle`, which decides between them
    on every poll (with the value functions of :mod:`.handover` and
    :mod:`.fallback`).
    """

    def __init__(
        self,
        consumer_config: Mapping[str, Any],
        topics: Sequence[str],
        instance_id: str,
        settings: PlanFollowerSettings | Mapping[str, Any] | None = None,
        *,
        on_assign: Hook | None = None,
        on_revoke: Hook | None = None,
        clock: Monotonic = time.monotonic,
        wall_clock: Clock = time.time,
        clients: FollowerClients | None = None,
    ) -> None:
        self.settings = s = checked_settings(settings)
        who = identity(consumer_config, topics, instance_id, s)
        self.group_id, self.member_id, self.rack = who.group_id, who.member_id, who.rack
        self.topics, self.key = who.topics, who.key
        self._on_assign_hook, self._on_revoke_hook = on_assign, on_revoke
        self._clock, self._wall = clock, wall_clock
        self.log = get_logger("rackplan.follower").bind(group=who.group_id, member=who.member_id)
        self.stats: collections.Counter[str] = collections.Counter()
        kafka = clients or FollowerClients()
        own_clients = client_config(consumer_config)
        self._parts = Partitions(
            dict(consumer_config),
            kafka.consumer,
            s.io_timeout_s,
            clock,
            self.log,
            self.stats,
            assigned=lambda parts: self._hook(self._on_assign_hook, parts),
            revoked=lambda parts: self._hook(self._on_revoke_hook, parts),
        )
        self._registrar = Registrar(who, s, own_clients, kafka.producer, wall_clock, self.log, self.stats)
        self._intake = ControlIntake(who, s, own_clients, kafka.tail, clock, wall_clock, self.log, self.stats)
        self._cycle = FollowerCycle(
            who.member_id,
            who.topics,
            s,
            self._parts,
            self._registrar,
            self._intake,
            clock,
            wall_clock,
            self.log,
            self.stats,
        )
        self._intake.open()
        self._cycle.register(force=True)
        self._cycle.service()

    # ---- public ---------------------------------------------------------------

    @property
    def mode(self) -> str:
        """``waiting`` (no plan partitions to read), ``plan`` (following one) or ``subscription`` (fallen back)."""
        return self._cycle.mode

    @property
    def generation(self) -> int:
        """The generation of the plan applied last (the registration's ``released_generation``)."""
        return self._cycle.generation

    def assignment(self) -> list[TP]:
        """Partitions this member reads now, sorted."""
        return sorted(self._parts.owned)

    def poll(self, timeout: float = 1.0) -> Any:
        """The next message (or error event) for the application, or None when ``timeout`` passes."""
        deadline = self._clock() + timeout
        while True:
            self._cycle.service()
            while self._parts.buffer:
                msg = self._parts.buffer.popleft()
                if self._parts.deliverable(msg, self._cycle.fenced_self):
                    return msg
            left = deadline - self._clock()
            msg = self._parts.consumer.poll(max(0.0, min(left, _SLICE_S)))
            if msg is not None:
                self._cycle.service()  # the checks run between fetching a message and handing it out
                if self._parts.deliverable(msg, self._cycle.fenced_self):
                    return msg
            if left <= 0:
                return None

    def commit(self) -> None:
        """Commit what was read so far (the follower also does this every ``commit_interval_s``)."""
        self._cycle.commit_positions(list(self._parts.owned))

    def close(self) -> None:
        """Commit and give up every partition, leave the group, remove the registration."""
        cycle = self._cycle
        if cycle.closed:
            return
        cycle.closing = True
        if cycle.mode == SUBSCRIPTION:
            self._parts.consumer.close()  # the revoke callback commits; the member leaves the group
            self._parts.forget(list(self._parts.owned))
        else:
            cycle.release(list(self._parts.owned), commit=True)
            self._parts.consumer.close()
        self._registrar.unregister(cycle.status())
        self._intake.close()
        cycle.closed = True
        self.log.info("follower closed")

    def abort(self) -> None:
        """Stop without committing, releasing or unregistering: what a crash looks like to the others."""
        if self._cycle.closed:
            return
        self._cycle.closed = True
        self._parts.owned.clear()
        self._on_assign_hook = self._on_revoke_hook = None
        self._intake.close()
        self._registrar.drop()
        self._parts.consumer.close()

    def _hook(self, hook: Hook | None, parts: list[TP]) -> None:
        if hook is not None and parts:
            hook(self, sorted(parts))
