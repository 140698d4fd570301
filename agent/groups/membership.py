"""The real membership of consumer groups: DescribeGroups through ``describe_consumer_groups``.

It gives, per group, every member's id, client.id, host, static instance id
and current assignment, but never its client.rack (KIP-881 carries it in
the JoinGroup subscription, which librdkafka's DescribeConsumerGroups does not
expose, nor the subscription's user data).  So a member's rack comes from its
registration, matched by :func:`member_racks` (same member id, same
group.instance.id, or a client.id equal to the registered id: a Java
``RackplanConsumer`` with ``rackplan.member.id`` joins under a Kafka member id
``<client.id>-<uuid>``), or else from the ``rack_mapping`` rules (client host
CIDR, client.id pattern).  A member none of these place has an *unknown*
rack: reported as such, never counted as local.

Brokers that cannot answer (librdkafka's mock cluster has no DescribeGroups;
an ACL may deny it) degrade, never fail: the reason is logged once and
counted, and the agent judges locality on its plans of record instead.  After
"unsupported", it tries again only after ``membership.retry_unsupported_s``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.ports import AdminPort, Logger
from ..kafka.errors import error_name, unsupported
from ..kafka.timeouts import operation_timeout_s, result_timeout_s
from ..metrics import declared as metric
from ..metrics.registry import Metrics
from ..settings.sections import MembershipSettings, RackRule, rack_for

#: group states in which a group has no members worth looking at
_GONE_STATES = {"DEAD", "UNKNOWN"}


@dataclass(frozen=True, slots=True)
class RealMember:
    member_id: str
    client_id: str
    #: the client's address as the broker saw it, without Kafka's leading slash
    host: str
    group_instance_id: str | None
    #: sorted [topic, partition] pairs currently assigned
    assignment: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class RealGroup:
    group_id: str
    state: str
    members: tuple[RealMember, ...]
    #: the group's protocol as the coordinator says: ``CONSUMER`` (KIP-848: the broker assigns),
    #: ``CLASSIC``, or ``UNKNOWN`` (a broker too old to say)
    type: str = "UNKNOWN"
    #: KIP-848: the broker-side assignor the coordinator uses (``uniform``, ``rackplan``...); classic:
    #: the protocol the members agreed on (``range``, ``cooperative-sticky``...); "" when none
    assignor: str = ""

    def assignment(self) -> dict[str, list[list[Any]]]:
        """member id -> [[topic, partition], ...], the shape plans use."""
        return {m.member_id: [[t, p] for t, p in m.assignment] for m in self.members}

    def topics(self) -> list[str]:
        return sorted({t for m in self.members for t, _ in m.assignment})


def _state_name(state: Any) -> str:
    name = getattr(state, "name", None)
    return str(name if name is not None else state).upper()


def real_group(desc: Any) -> RealGroup:
    """A confluent-kafka ``ConsumerGroupDescription`` as plain immutable data."""
    members = []
    for m in desc.members or []:
        parts = getattr(getattr(m, "assignment", None), "topic_partitions", None) or []
        members.append(
            RealMember(
                member_id=str(m.member_id),
                client_id=str(m.client_id or ""),
                host=str(m.host or "").lstrip("/"),
                group_instance_id=m.group_instance_id or None,
                assignment=tuple(sorted((str(tp.topic), int(tp.partition)) for tp in parts)),
            )
        )
    return RealGroup(
        group_id=str(desc.group_id),
        state=_state_name(desc.state),
        members=tuple(sorted(members, key=lambda m: m.member_id)),
        type=_state_name(getattr(desc, "type", None) or "UNKNOWN"),
        assignor=str(getattr(desc, "partition_assignor", None) or ""),
    )


@dataclass(frozen=True, slots=True)
class MemberRacks:
    """The rack of each real member of a group, and the members whose rack nobody could say."""

    #: member id -> rack (None: the member has no client.rack, as registered)
    racks: Mapping[str, str | None]
    #: member ids (sorted) that no registration and no ``rack_mapping`` rule places
    unknown: tuple[str, ...] = ()


def member_racks(
    group: RealGroup, registered_members: Iterable[Mapping[str, Any]], rules: tuple[RackRule, ...]
) -> MemberRacks:
    """Rack of each real member: its registration (:func:`match_registrations`), else the rules, else unknown."""
    return racks_of(*match_registrations(group, registered_members), rules)


def racks_of(
    matched: Mapping[str, Mapping[str, Any]], pending: Iterable[RealMember], rules: tuple[RackRule, ...]
) -> MemberRacks:
    """The rack of each member a registration matched (its ``rack``), else the rules' guess, else unknown."""
    out: dict[str, str | None] = {m: reg.get("rack") for m, reg in matched.items()}
    unknown = []
    for m in pending:
        rack = rack_for(rules, m.client_id, m.host)
        if rack is None:
            unknown.append(m.member_id)
        else:
            out[m.member_id] = rack
    return MemberRacks(racks=dict(sorted(out.items())), unknown=tuple(sorted(unknown)))


def match_registrations(
    group: RealGroup, registered_members: Iterable[Mapping[str, Any]]
) -> tuple[dict[str, Mapping[str, Any]], list[RealMember]]:
    """The registration of each real member that has one (live member id -> it), and the members left over.

    A registration matches a live member by member id, then by
    group.instance.id (the registered ``group_instance_id``, or the registered
    member id: followers register their instance id as their member id), then
    by client.id equal to the registered member id or instance id when
    exactly one live member carries that client.id (two members sharing a
    client.id cannot be told apart: neither is matched that way).  A
    registration already matched by id is not matched again by client.id.
    The same rule tells which live member a plan's member id is (``rackplan plans diff``).
    """
    regs = list(registered_members)
    by_id: dict[str, Mapping[str, Any]] = {str(r.get("member_id")): r for r in regs}
    by_instance: dict[str, Mapping[str, Any]] = {}
    for r in regs:
        by_instance.setdefault(str(r.get("member_id")), r)
    for r in regs:
        if r.get("group_instance_id"):
            by_instance[str(r["group_instance_id"])] = r
    clients: dict[str, int] = {}
    for m in group.members:
        clients[m.client_id] = clients.get(m.client_id, 0) + 1
    out: dict[str, Mapping[str, Any]] = {}
    taken: set[int] = set()
    pending = []
    for m in group.members:
        reg = by_id.get(m.member_id)
        if reg is None and m.group_instance_id is not None:
            reg = by_instance.get(m.group_instance_id)
        if reg is not None:
            out[m.member_id] = reg
            taken.add(id(reg))
        else:
            pending.append(m)
    left = []
    for m in pending:
        reg = by_instance.get(m.client_id) if m.client_id and clients[m.client_id] == 1 else None
        if reg is not None and id(reg) not in taken:
            out[m.member_id] = reg
            taken.add(id(reg))
        else:
            left.append(m)
    return out, left


class GroupDescriber:
    """Describes groups in batches; an empty answer whenever the brokers cannot say."""

    def __init__(
        self,
        admin: AdminPort,
        settings: MembershipSettings,
        metrics: Metrics,
        log: Logger,
        *,
        request_timeout_s: float,
        batch_size: int = 100,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.admin = admin
        self.settings = settings
        self.metrics = metrics
        self.log = log
        self.request_timeout_s = request_timeout_s
        self.batch_size = batch_size
        self.clock = clock
        #: why describing is off for now (None: on)
        self.unsupported: str | None = None
        self._unsupported_since = 0.0
        self._logged: dict[str, str] = {}

    @property
    def enabled(self) -> bool:
        if not self.settings.describe_groups:
            return False
        if self.unsupported is None:
            return True
        if self.clock() - self._unsupported_since >= self.settings.retry_unsupported_s:
            self.unsupported = None
            return True
        return False

    def _log_once(self, key: str, message: str, **fields: Any) -> None:
        text = f"{message} {sorted(fields.items())}"
        if self._logged.get(key) != text:
            self._logged[key] = text
            self.log.warning(message, **fields)

    def describe(self, group_ids: Sequence[str]) -> dict[str, RealGroup]:
        """Every group that could be described (a dead or unknown group has no members)."""
        out: dict[str, RealGroup] = {}
        ids = sorted(set(group_ids))
        for i in range(0, len(ids), self.batch_size):
            if not self.enabled:
                break
            self._describe_batch(ids[i : i + self.batch_size], out)
        return out

    def _describe_batch(self, ids: list[str], out: dict[str, RealGroup]) -> None:
        timeout = self.request_timeout_s
        try:
            futures = self.admin.describe_consumer_groups(ids, request_timeout=operation_timeout_s(timeout))
        except Exception as e:
            self._failed(error_name(e, type(e).__name__), str(e), ids)
            return
        for gid in ids:
            try:
                desc = futures[gid].result(timeout=result_timeout_s(timeout))
            except Exception as e:
                name = error_name(e, type(e).__name__)
                if unsupported(name):
                    self._failed(name, str(e), ids)
                    return
                self.metrics.inc(metric.DESCRIBE_GROUPS_FAILURES_TOTAL, {"reason": name})
                self._log_once(
                    gid,
                    "describe_consumer_groups failed for a group; using its plan of record",
                    group=gid,
                    reason=name,
                    error=str(e),
                )
                continue
            self._logged.pop(gid, None)
            group = real_group(desc)
            gone = RealGroup(gid, group.state, (), group.type, group.assignor)
            out[gid] = group if group.state not in _GONE_STATES else gone

    def _failed(self, name: str, detail: str, ids: list[str]) -> None:
        if unsupported(name):
            self.metrics.inc(metric.DESCRIBE_GROUPS_FAILURES_TOTAL, {"reason": "unsupported"})
            self.unsupported = f"{name}: {detail}"
            self._unsupported_since = self.clock()
            self.log.warning(
                "describe_consumer_groups is not supported by the brokers; locality is judged on the "
                "plans of record and groups without registered members cannot be planned",
                reason=self.unsupported,
                retry_after_s=self.settings.retry_unsupported_s,
            )
            return
        self.metrics.inc(metric.DESCRIBE_GROUPS_FAILURES_TOTAL, {"reason": name})
        self._log_once(
            "*", "describe_consumer_groups failed; using plans of record", reason=name, error=detail
        )
