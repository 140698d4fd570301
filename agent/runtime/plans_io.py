"""``rackplan plans``: the thin I/O layer, everything the analysis reads from Kafka and nothing else.

It reads; it never writes, creates a topic or joins a group, so it needs only Describe and Read
on the plan topic (and on the registrations topic, and Describe on the group, for ``explain`` and
``diff``), and no agent needs to run: it works against a standby agent's cluster, or with every
agent stopped.  The analysis (:mod:`.plans_record`, :mod:`.plans_explain`, :mod:`.plans_diff`)
takes the values these methods return.

The live assignment comes from a :class:`LiveSource`: by default DescribeConsumerGroups through
the admin client; tests give their own (librdkafka's mock cluster has no DescribeGroups).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..cluster.metadata import Snapshot, poll_snapshot
from ..core.errors import AgentError, CannotRun
from ..core.logging import with_kafka_logger
from ..core.ports import AdminPort
from ..groups.live import registered_members
from ..groups.membership import RealGroup, member_racks, real_group
from ..groups.registered import merged_registrations
from ..kafka.errors import error_name, transient
from ..kafka.exceptions import TopicReadError
from ..kafka.tail import RawRecord, read_to_end
from ..kafka.timeouts import admin_client_config, operation_timeout_s, result_timeout_s
from ..planning.planner import Registration
from ..settings.sections import Settings
from .plans_record import PlanTopic, plan_topic
from .preflight import reach_brokers


class PlansProblem(AgentError, RuntimeError):
    """What keeps a ``rackplan plans`` command from its answer: a topic not readable, a group not described."""


class LiveSource(Protocol):
    """The live assignment of a consumer group (DescribeConsumerGroups); :class:`PlansProblem` when unknown."""

    def __call__(self, group_id: str) -> RealGroup: ...


def describer(
    admin: AdminPort,
    timeout_s: float,
    budget_s: float,
    backoff_s: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> LiveSource:
    """The real :class:`LiveSource`: DescribeConsumerGroups through ``admin``.

    An answer that clears by itself (the group's coordinator moving or loading, a broker restarting:
    :func:`~..kafka.errors.transient`) is asked again, the delay doubling from ``backoff_s``, for up to
    ``budget_s``; any other (unsupported, denied) at once is a :class:`PlansProblem`.
    """

    def describe(group_id: str) -> RealGroup:
        deadline = clock() + budget_s
        delay = backoff_s
        while True:
            try:
                futures = admin.describe_consumer_groups(
                    [group_id], request_timeout=operation_timeout_s(timeout_s)
                )
                return real_group(futures[group_id].result(timeout=result_timeout_s(timeout_s)))
            except Exception as e:  # KafkaException: unsupported, denied, coordinator moving
                if not transient(e) or clock() + delay > deadline:
                    raise PlansProblem(
                        f"group {group_id!r} could not be described: {error_name(e, type(e).__name__)}: {e}"
                    ) from None
            sleep(delay)
            delay *= 2

    return describe


@dataclass
class PlansReader:
    """What the commands read, each on demand: the plan topic, the metadata, registrations, a live group."""

    settings: Settings
    admin: AdminPort | None = None
    live: LiveSource | None = None
    clock: Callable[[], float] = time.time
    #: what was read with a caveat (a topic not readable): shown with the answer
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.config = with_kafka_logger(self.settings.kafka.client_config())
        if self.admin is None:
            from confluent_kafka.admin import AdminClient

            self.admin = AdminClient(
                admin_client_config(self.config, self.settings.metadata.request_timeout_s)
            )
        self.secret = self.settings.registrations.secret()
        self._topics: set[str] | None = None

    @property
    def _admin(self) -> AdminPort:
        assert self.admin is not None
        return self.admin

    def connect(self) -> None:
        """Reach the brokers within ``kafka.startup_timeout_s``; :class:`CannotRun` naming them otherwise."""
        s = self.settings
        found: list[Any] = []
        problem = reach_brokers(
            lambda timeout: found.append(self._admin.list_topics(timeout=timeout)),
            s.kafka.bootstrap_servers,
            s.kafka.startup_timeout_s,
            min(s.metadata.request_timeout_s, max(1.0, s.kafka.startup_timeout_s / 3)),
            s.metadata.backoff_initial_s,
        )
        if problem is not None:
            raise CannotRun(problem)
        self._topics = set(found[-1].topics)

    def _read(self, topic: str, what: str) -> list[RawRecord]:
        if self._topics is None:
            self.connect()
        assert self._topics is not None
        if topic not in self._topics:
            raise PlansProblem(f"{what} {topic!r} does not exist on this cluster")
        try:
            return read_to_end(self.config, topic, self.settings.io_timeout_s, what)
        except TopicReadError as e:
            raise PlansProblem(str(e)) from None

    def plans(self) -> PlanTopic:
        """The plan topic to its end, as followers holding the settings' secret see it."""
        topic = self.settings.plan_topic
        return plan_topic(self._read(topic, "plan topic (plan_topic)"), topic, self.secret)

    def metadata(self) -> tuple[Snapshot, dict[int, str | None]]:
        """Brokers, racks and replica lists now (the agent's own metadata reader)."""
        snap = poll_snapshot(self._admin, self.settings.metadata)
        return snap, snap.resolve_racks({})

    def registration(self, key: str, real: RealGroup | None = None) -> Registration | None:
        """The group ``key`` as the agent would plan it now: the settings file and the registrations topic
        merged (with ``real``'s members when the group is discovered); None when neither defines it."""
        s = self.settings
        try:
            raw = self._read(s.registrations_topic, "registrations topic (registrations_topic)")
        except PlansProblem as e:
            raw = []
            self.notes.append(f"{e}: member racks from the settings file only")
        discovered = {} if real is None else {real.group_id: real}
        merged = merged_registrations(s, raw, int(self.clock() * 1000), discovered)
        return next((reg for reg in merged.registrations if reg.key == key), None)

    def group(self, group_id: str) -> RealGroup:
        """The group's live assignment; :class:`PlansProblem` when the brokers do not say."""
        s = self.settings
        live = self.live or describer(
            self._admin, s.metadata.request_timeout_s, s.io_timeout_s, s.metadata.backoff_initial_s
        )
        return live(group_id)


def racks_of(
    reg: Registration | None, real: RealGroup | None, planned: Mapping[str, Any], settings: Settings
) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """The racks of the plan's members (by plan member id) and of the live members (by Kafka member id).

    A registered member's rack is its word; a live member the registrations do not place gets the
    ``rack_mapping`` rules' (as the agent judges live locality, :mod:`~..groups.live`); a member none
    of these place is absent: of unknown rack.  A discovered group's plan names a static member by its
    ``group.instance.id``, any other by Kafka's member id (:func:`~..groups.registry._discovered_members`).
    """
    registered = [] if reg is None else registered_members(reg)
    planned_racks: dict[str, str | None] = {str(m.get("member_id")): m.get("rack") for m in registered}
    live_racks: dict[str, str | None] = {}
    if real is not None:
        live_racks = dict(member_racks(real, registered, settings.rack_mapping).racks)
        for m in real.members:
            plan_id = m.group_instance_id or m.member_id
            if plan_id in planned and plan_id not in planned_racks and m.member_id in live_racks:
                planned_racks[plan_id] = live_racks[m.member_id]
    return planned_racks, live_racks
