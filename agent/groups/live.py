"""Locality of a consumer group's live assignment (DescribeGroups), with the partitions of unknown racks apart.

The brokers say which member holds which partition, never the member's rack
(see :mod:`.membership`).  Where a member's rack cannot be established, its
partitions are neither local nor cross-rack: they are counted as
``unknown_rack`` and the member named, so an unmatched member can never make
a group look local (issue 24: Java followers read 2 of 6 partitions cross-rack
while the agent reported 0).

A classic Kafka Streams app is a consumer-protocol group too: its members are
stream threads holding their active tasks' source partitions, placed through
their registered client (:mod:`.streams_members`); those source partitions are
what is judged live.  A KIP-1071 Streams group cannot be described here (see
:mod:`.paths`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from ..cluster.metadata import Snapshot
from ..planning.planner import Registration, assignment_locality
from ..protocol.plans import CONSUMER, STREAMS, Locality
from ..settings.sections import RackRule
from .membership import MemberRacks, RealGroup, member_racks
from .streams_members import streams_member_racks


@dataclass(frozen=True, slots=True)
class LiveLocality:
    """The live assignment judged: cross-rack among members of known rack; the rest unknown."""

    #: cross-rack partitions held by members whose rack is known
    cross_rack: int
    #: every live partition that exists (known and unknown racks)
    total: int
    #: partitions held by members whose rack is unknown
    unknown_rack: int = 0
    #: those members' ids (sorted)
    unknown_members: tuple[str, ...] = ()

    @property
    def judged(self) -> Locality:
        """What a locality judgement may use: the partitions of members whose rack is known."""
        return Locality(self.cross_rack, self.total - self.unknown_rack)

    def as_json(self) -> dict[str, Any]:
        return {
            "cross_rack": self.cross_rack,
            "total": self.total,
            "unknown_rack": self.unknown_rack,
            "unknown_rack_members": list(self.unknown_members),
        }


def registered_members(reg: Registration) -> list[Mapping[str, Any]]:
    """The members (Streams: clients) whose registered rack is their word: discovered members' racks are only
    the rules' guess."""
    if reg.source.endswith("discovered"):
        return []  # their rack came from rack_mapping: the rules themselves decide, None is unknown
    return list(reg.spec.get("members" if reg.kind == CONSUMER else "clients") or [])


def describable(
    reg: Registration, real_groups: Mapping[str, RealGroup], kip1071: Collection[str] = frozenset()
) -> RealGroup | None:
    """The group's description this cycle, when it has one: a consumer group, or a classic Streams app (its
    group id is its application id); None for anything else.

    ``kip1071``: the application ids of the KIP-1071 apps (``group_protocol: streams``).  Such an app is never
    described (no StreamsGroupDescribe), so a description under its id is another group's, a consumer group
    of the same id that is registered too: judging the app on it would page for a group it is not.
    """
    if reg.kind == STREAMS and reg.name in kip1071:
        return None
    return real_groups.get(reg.name) if reg.kind in (CONSUMER, STREAMS) else None


def racks_of_members(reg: Registration, real: RealGroup, rules: tuple[RackRule, ...]) -> MemberRacks:
    """Each live member's rack, matched the way the group's kind registers its members."""
    if reg.kind == STREAMS:
        return streams_member_racks(real, reg.name, registered_members(reg), rules)
    return member_racks(real, registered_members(reg), rules)


def live_locality(
    snap: Snapshot,
    racks: Mapping[int, str | None],
    reg: Registration,
    real: RealGroup,
    rules: tuple[RackRule, ...],
) -> LiveLocality:
    """Locality of ``real``'s assignment under ``snap``: members of known rack judged, the others counted apart."""
    mr = racks_of_members(reg, real, rules)
    assignment = real.assignment()
    unknown = set(mr.unknown)
    known = {m: parts for m, parts in assignment.items() if m not in unknown}
    loc = assignment_locality(snap, racks, reg, known, mr.racks)
    rest = assignment_locality(snap, racks, reg, {m: assignment[m] for m in sorted(unknown)}, {})
    held = tuple(m for m in mr.unknown if assignment.get(m))
    return LiveLocality(loc.cross_rack, loc.total + rest.total, rest.total, held)
