"""Member racks that no broker has: the classic misconfiguration behind a plan 100% cross-rack.

Rack ids are opaque strings compared exactly, so a member whose ``client.rack``
is an AZ name (``us-east-1a``) in a cluster whose brokers carry AZ ids
(``use1-az1``), or a typo (``az-q``), is cross-rack for every partition, and
no plan can help.  The agent plans it as registered (it may be right and a
broker of that rack may join) but says so where operators look: the plan's
reason, a log event, ``rackplan_member_racks_unknown`` and ``/v1/groups``,
with the nearest rack names the brokers do have.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..protocol.plans import CONSUMER
from .planner import Registration

#: how many known rack names are suggested for an unknown one
SUGGESTIONS = 3


@dataclass(frozen=True, slots=True)
class RackMismatch:
    """One member (or Streams client) whose rack no broker of the cluster has."""

    member: str
    rack: str
    #: the brokers' rack names nearest to ``rack`` (difflib's ratio), best first
    nearest: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {"member": self.member, "rack": self.rack, "nearest_known_racks": list(self.nearest)}

    def text(self) -> str:
        near = ", ".join(repr(r) for r in self.nearest)
        return f"member {self.member[:200]!r} has rack {self.rack[:200]!r}, which no broker has (nearest: {near})"


def nearest(name: str, known: Iterable[str], n: int = SUGGESTIONS) -> tuple[str, ...]:
    """Up to ``n`` names of ``known`` nearest to ``name`` (difflib's ratio), best first, ties by name."""
    matcher = difflib.SequenceMatcher(b=name)
    scored = []
    for k in sorted(set(known)):
        matcher.set_seq1(k)
        scored.append((-matcher.ratio(), k))
    return tuple(k for _, k in sorted(scored)[:n])


def unmatched_racks(reg: Registration, broker_racks: Iterable[str | None]) -> tuple[RackMismatch, ...]:
    """Members of ``reg`` whose rack is set and is none of ``broker_racks``, sorted by member id.

    Brokers without any rack make no comparison possible (rack-awareness is
    off for the whole cluster): nothing is reported then.
    """
    known = sorted({r for r in broker_racks if r})
    if not known:
        return ()
    members_key, id_key = ("members", "member_id") if reg.kind == CONSUMER else ("clients", "process_id")
    out = []
    for m in reg.spec.get(members_key) or []:
        rack = m.get("rack")
        if isinstance(rack, str) and rack and rack not in known:
            out.append(RackMismatch(str(m.get(id_key)), rack, nearest(rack, known)))
    return tuple(sorted(out, key=lambda x: x.member))
