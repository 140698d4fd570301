"""Locality of a consumer group's live assignment (DescribeGroups), with the partitions of unknown racks apart.

The brokers say which member holds which partition, never the member's rack
(see :mod:`.membership`).  Where a member's rack cannot be established, its
partitions are neither local nor cross-rack: they are counted as
``unknown_rack`` and the member named, so an unmatched member can never make
a group look local (issue 24: Java followers read 2 of 6 partitions cross-rack
while the agent reported 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..cluster.metadata import Snapshot
from ..planning.planner import Registration, assignment_locality
from ..protocol.plans import Locality
from ..settings.sections import RackRule
from .membership import RealGroup, member_racks


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
    """The members whose registered rack is their word: discovered members' racks are only the rules' guess."""
    if reg.source.endswith("discovered"):
        return []  # their rack came from rack_mapping: the rules themselves decide, None is unknown
    return list(reg.spec.get("members") or [])


def live_locality(
    snap: Snapshot,
    racks: Mapping[int, str | None],
    reg: Registration,
    real: RealGroup,
    rules: tuple[RackRule, ...],
) -> LiveLocality:
    """Locality of ``real``'s assignment under ``snap``: members of known rack judged, the others counted apart."""
    mr = member_racks(real, registered_members(reg), rules)
    assignment = real.assignment()
    unknown = set(mr.unknown)
    known = {m: parts for m, parts in assignment.items() if m not in unknown}
    loc = assignment_locality(snap, racks, reg, known, mr.racks)
    rest = assignment_locality(snap, racks, reg, {m: assignment[m] for m in sorted(unknown)}, {})
    held = tuple(m for m in mr.unknown if assignment.get(m))
    return LiveLocality(loc.cross_rack, loc.total + rest.total, rest.total, held)
