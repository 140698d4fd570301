"""Registrations: the settings file, the registrations topic and the groups' real membership, merged.

Records on ``registrations_topic`` (compacted) are keyed per member or client:
``consumer/<group_id>/<member_id>`` or ``streams/<application_id>/<process_id>``
(UTF-8, with ``%`` and ``/`` inside an id written ``%25`` and ``%2F`` so two
members never share a key); the value (JSON, docs/registration-schema.json)
repeats the ids and must match the key.  A tombstone removes the entry.  An
entry expires ``registrations.ttl_s`` after the record's broker timestamp (or
its ``timestamp_ms`` when that is older; a timestamp further in the future
than ``registrations.max_clock_skew_s`` counts as the record's arrival):
clients re-publish their record to stay registered.  With
``registrations.secret_file`` set, only records signed with that shared
secret count (:func:`sign_registration`).  A malformed record is skipped with
a logged reason and counted, never fatal (docs/security.md).

Merge precedence, per group or app:

1. The settings file wins for everything it states: group-level fields
   (assignor, fetch_mode, topics, Streams sub-topologies and options) and the
   members or clients it lists.  Records of members it does not list are
   refused (:func:`settings_group_refusal`) unless
   ``registrations.allow_override_settings_groups`` is on.
2. With that setting on, the topic adds members / clients the file does not
   list (by member_id / process_id).  For a group the file does not define,
   each group-level field comes from the newest record (timestamp, then key)
   that carries it.
3. A consumer group left with no members takes its real members from
   DescribeGroups, each member's rack from ``rack_mapping`` (first matching
   rule), its topics from the group's ``topics`` or else the topics of the
   group's current assignment; a static member's id in plans is its
   ``group.instance.id`` (:func:`_discovered_members`).

A group whose merged definition changes gets a new registration fingerprint,
so the loop re-plans it; a group that disappears gets a tombstone.

Members that follow plans (:class:`rackplan.agent.follower.PlanFollower`) add
``follower: true``, ``mode`` and ``released_generation`` to their record: the
last says which plan generation the member has applied (everything outside its
assignment in that plan released, offsets committed), which is how a two-phase
handover learns that a partition is free.  These fields change without
re-planning anything: they are kept apart from the registration (see
:class:`FollowerStatus`).

The record codec (keys, values, signatures) is
:mod:`rackplan.agent.protocol.registrations`: import them from there (one path per name).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..planning.planner import Registration, make_registration
from ..protocol import registrations as _codec
from ..protocol.plans import CONSUMER, STREAMS, plan_key
from ..protocol.registrations import (
    Entry,
    FollowerStatus,
)
from ..settings.contract_checks import check_consumer_group, check_streams_app
from ..settings.sections import RackRule, Settings, rack_for
from .membership import RealGroup

__all__ = [
    "MergeResult",
    "RegistrationStore",
    "decode_registration",
    "merge_registrations",
    "settings_group_refusal",
]


def contract_check(kind: str, spec: dict[str, Any], where: str) -> None:
    """The settings' checks of a contract object: what a registration must pass to count."""
    (check_consumer_group if kind == CONSUMER else check_streams_app)(spec, where)


def decode_registration(
    key: bytes | str | None,
    value: bytes | None,
    record_ts_ms: int | None,
    *,
    secret: bytes | None = None,
    max_skew_ms: int = 10_000,
) -> Entry | None:
    """:func:`rackplan.agent.protocol.registrations.decode_registration` with the contract's checks."""
    return _codec.decode_registration(
        key, value, record_ts_ms, check=contract_check, secret=secret, max_skew_ms=max_skew_ms
    )


class RegistrationStore:
    """Live entries of the registrations topic; ``version`` changes whenever what they say changes."""

    def __init__(self, ttl_s: float, max_skew_s: float = 10.0) -> None:
        self.ttl_ms = int(ttl_s * 1000)
        self.max_skew_ms = int(max_skew_s * 1000)
        self._entries: dict[str, Entry] = {}
        self.version = 0

    def __len__(self) -> int:
        return len(self._entries)

    def apply(self, key: str, entry: Entry | None, now_ms: int) -> bool:
        """Apply one record (later offsets win); True when the registrations changed."""
        old = self._entries.get(key)
        if entry is None:
            if old is None:
                return False
            del self._entries[key]
            self.version += 1
            return True
        if entry.timestamp_ms < 0 or entry.timestamp_ms > now_ms + self.max_skew_ms:
            # No timestamp, or one further ahead than clocks drift: it counts from its arrival, so a
            # record dated in the future cannot make an entry immune to the TTL.
            entry = entry.with_timestamp(now_ms)
        self._entries[key] = entry
        if old is not None and old.same_content(entry):
            return False  # a heartbeat: only the timestamp moved
        self.version += 1
        return True

    def due(self, now_ms: int) -> list[str]:
        """Keys of entries older than the TTL (what :meth:`expire` would drop now), sorted."""
        if self.ttl_ms <= 0:
            return []
        return sorted(k for k, e in self._entries.items() if now_ms - e.timestamp_ms > self.ttl_ms)

    def expire(self, now_ms: int) -> list[str]:
        """Drop entries older than the TTL; their keys, sorted."""
        gone = self.due(now_ms)
        for k in gone:
            del self._entries[k]
        if gone:
            self.version += 1
        return gone

    def entries(self) -> list[Entry]:
        return [self._entries[k] for k in sorted(self._entries)]

    def followers(self, kind: str, name: str) -> dict[str, FollowerStatus]:
        """Live plan-following members of one group: member id -> status."""
        out: dict[str, FollowerStatus] = {}
        for e in list(self._entries.values()):  # list(): the HTTP thread may read while the loop writes
            if e.follower is not None and e.kind == kind and e.name == name:
                out[str(e.member.get("member_id"))] = e.follower
        return dict(sorted(out.items()))


@dataclass
class MergeResult:
    registrations: list[Registration] = field(default_factory=list)
    #: key -> why that group or app cannot be registered now
    problems: dict[str, str] = field(default_factory=dict)


def _newest_fields(entries: list[Entry]) -> dict[str, Any]:
    """Each group-level field from the newest entry carrying it (timestamp, then key)."""
    out: dict[str, Any] = {}
    for e in sorted(entries, key=lambda e: (e.timestamp_ms, e.key)):
        out.update(e.group)
    return out


def _discovered_members(
    spec: Mapping[str, Any], group: RealGroup, rules: tuple[RackRule, ...]
) -> list[dict[str, Any]]:
    """The group's live members as registered ones, sorted by the id its plans give them.

    A static member is named by its ``group.instance.id``: the id the brokers' ``RackplanServerAssignor``
    and the classic ``RackplanAssignor`` match plan members on (docs/java.md), and the one a restart keeps
    (a KIP-848 member comes back under a new member id), so that restart changes neither the registration
    nor the plan.  A dynamic member has only Kafka's member id.
    """
    topics = list(spec.get("topics") or group.topics())
    out = []
    for m in group.members:
        member: dict[str, Any] = {
            "member_id": m.group_instance_id or m.member_id,
            "rack": rack_for(rules, m.client_id, m.host),
            "topics": topics,
        }
        if m.group_instance_id is not None:
            member["group_instance_id"] = m.group_instance_id
        out.append(member)
    return sorted(out, key=lambda m: str(m["member_id"]))


def settings_group_refusal(settings: Settings, entry: Entry) -> str | None:
    """Why ``entry`` may not change a group the settings file defines, or None.

    The settings file is the operator's word; anyone who can write the
    registrations topic could otherwise add members to a file-defined group
    (and take its partitions).  Unless ``registrations.allow_override_settings_groups``
    is on, a record of such a group counts only for a member the file lists (a
    plan follower's status); any other member is refused.
    """
    if settings.registrations.allow_override_settings_groups:
        return None
    if entry.kind == CONSUMER:
        specs = [g for g in settings.consumer_groups if g["group_id"] == entry.name]
        members_key, id_key = "members", "member_id"
    else:
        specs = [a for a in settings.streams_apps if a["application_id"] == entry.name]
        members_key, id_key = "clients", "process_id"
    if not specs:
        return None
    listed = {str(m.get(id_key)) for m in specs[0].get(members_key) or []}
    if str(entry.member.get(id_key)) in listed:
        return None
    return (
        f"{entry.kind}/{entry.name} is defined in the settings file, which does not list "
        f"{str(entry.member.get(id_key))[:200]!r}; registrations.allow_override_settings_groups is false"
    )


def merge_registrations(
    settings: Settings,
    entries: Iterable[Entry],
    discovered: Mapping[str, RealGroup] | None = None,
) -> MergeResult:
    """Every registration, sorted by key, merged as the module docstring says."""
    discovered = discovered or {}
    by_group: dict[tuple[str, str], list[Entry]] = {}
    for e in entries:
        if settings_group_refusal(settings, e) is None:
            by_group.setdefault((e.kind, e.name), []).append(e)
    files: dict[tuple[str, str], Mapping[str, Any]] = {}
    for g in settings.consumer_groups:
        files[(CONSUMER, g["group_id"])] = g
    for a in settings.streams_apps:
        files[(STREAMS, a["application_id"])] = a
    result = MergeResult()
    for kind, name in sorted(set(files).union(by_group)):
        file_spec = files.get((kind, name))
        topic_entries = by_group.get((kind, name), [])
        members_key, id_key = ("members", "member_id") if kind == CONSUMER else ("clients", "process_id")
        if file_spec is not None:
            spec = dict(file_spec)
            listed = {str(m.get(id_key)) for m in spec.get(members_key) or []}
            extra = [dict(e.member) for e in topic_entries if str(e.member.get(id_key)) not in listed]
            spec[members_key] = [*(spec.get(members_key) or []), *extra]
            source = "file+topic" if extra else "file"
        else:
            spec = {("group_id" if kind == CONSUMER else "application_id"): name}
            spec.update(_newest_fields(topic_entries))
            spec[members_key] = [dict(e.member) for e in topic_entries]
            source = "topic"
        key = plan_key(kind, name)
        if kind == CONSUMER and not spec[members_key] and name in discovered:
            spec[members_key] = _discovered_members(spec, discovered[name], settings.rack_mapping)
            source = "discovered" if file_spec is None else "file+discovered"
        if kind == STREAMS and not spec.get("subtopologies"):
            result.problems[key] = "no registration of this app carries its subtopologies"
            continue
        try:
            (check_consumer_group if kind == CONSUMER else check_streams_app)(spec, key)
        except ValueError as e:
            result.problems[key] = str(e)
            continue
        result.registrations.append(make_registration(kind, spec, settings.fetch_mode, source))
    return result
