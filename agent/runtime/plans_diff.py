"""``rackplan plans diff``: a consumer group's plan of record against its live assignment.

Pure: the plan's assignment (plan member id -> partitions), the group as the brokers describe it
(:class:`~..groups.membership.RealGroup`, DescribeConsumerGroups), the members' racks and the
metadata in; a :class:`PlanDiff` out.  A plan names members by the id they registered; Kafka
names them its own way (a KIP-848 uuid, ``<client.id>-<uuid>``), so each live member is matched
to a plan member by the agent's own rule (:func:`~..groups.membership.match_registrations`:
member id, group.instance.id, then a unique client.id).

Reported: the members whose partitions differ (what each lacks, what each holds beyond its
plan), the planned partitions nobody holds, those held by another member than the planned
one, those held twice, those held but planned for nobody, and the cross-rack partitions of the
live assignment beside the plan's under the same metadata (:mod:`.plans_explain`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..cluster.metadata import Snapshot
from ..groups.membership import RealGroup, match_registrations
from .plans_explain import Assignment, Explanation, explain

TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class MemberDiff:
    """One member of the plan or of the live group: what it lacks and what it holds beyond its plan."""

    #: the plan's member id (None: a live member the plan does not name)
    planned: str | None
    #: Kafka's member id (None: a plan member not in the live group)
    live: str | None
    planned_count: int
    live_count: int
    missing: tuple[TP, ...] = ()
    extra: tuple[TP, ...] = ()

    @property
    def same(self) -> bool:
        return self.live is not None and self.planned is not None and not self.missing and not self.extra

    @property
    def name(self) -> str:
        return self.planned if self.planned is not None else str(self.live)

    def as_json(self) -> dict[str, Any]:
        return {
            "member": self.planned,
            "live_member": self.live,
            "planned": self.planned_count,
            "live": self.live_count,
            "same": self.same,
            "missing": [list(tp) for tp in self.missing],
            "extra": [list(tp) for tp in self.extra],
        }


@dataclass(frozen=True, slots=True)
class PlanDiff:
    group_id: str
    state: str
    members: tuple[MemberDiff, ...]
    unowned: tuple[TP, ...]
    #: (partition, its plan member, who holds it)
    wrong_member: tuple[tuple[TP, str, tuple[str, ...]], ...]
    #: (partition, the members holding it): a partition owned twice
    owned_twice: tuple[tuple[TP, tuple[str, ...]], ...]
    #: (partition, who holds it): held, planned for nobody
    unplanned: tuple[tuple[TP, tuple[str, ...]], ...]
    planned_locality: Explanation
    live_locality: Explanation
    notes: tuple[str, ...] = field(default=())

    @property
    def in_step(self) -> bool:
        return all(m.same for m in self.members) and not (
            self.unowned or self.wrong_member or self.owned_twice or self.unplanned
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "state": self.state,
            "in_step": self.in_step,
            "members_differ": [m.name for m in self.members if not m.same],
            "members": [m.as_json() for m in self.members],
            "unowned": [list(tp) for tp in self.unowned],
            "wrong_member": [
                {"topic": t, "partition": p, "planned": planned, "held_by": list(held)}
                for (t, p), planned, held in self.wrong_member
            ],
            "owned_twice": [
                {"topic": t, "partition": p, "held_by": list(held)} for (t, p), held in self.owned_twice
            ],
            "unplanned": [
                {"topic": t, "partition": p, "held_by": list(held)} for (t, p), held in self.unplanned
            ],
            "cross_rack": {
                "planned": self.planned_locality.counts()[CROSS],
                "live": self.live_locality.counts()[CROSS],
                "planned_counts": self.planned_locality.counts(),
                "live_counts": self.live_locality.counts(),
            },
            "notes": list(self.notes),
        }


CROSS = "cross_rack"


def _tps(parts: Any) -> set[TP]:
    return {(str(t), int(p)) for t, p in parts}


def plan_diff(
    planned: Assignment,
    real: RealGroup,
    planned_racks: Mapping[str, str | None],
    live_racks: Mapping[str, str | None],
    snapshot: Snapshot,
    racks: Mapping[int, str | None],
    fetch_mode: str,
) -> PlanDiff:
    """The plan against the live group (module docstring).

    ``planned_racks``: plan member id -> rack; ``live_racks``: Kafka member id -> rack, as far as known.
    """
    matched, _ = match_registrations(real, [{"member_id": m} for m in sorted(planned)])
    as_planned = {live: str(reg["member_id"]) for live, reg in matched.items()}
    name = {m.member_id: as_planned.get(m.member_id, m.member_id) for m in real.members}
    live_of = {p: live for live, p in as_planned.items()}
    want = {m: _tps(parts) for m, parts in planned.items()}
    have = {m.member_id: set(m.assignment) for m in real.members}
    members: list[MemberDiff] = []
    for m in sorted(want):
        live = live_of.get(m)
        held = have.get(live, set()) if live is not None else set()
        members.append(
            MemberDiff(
                m, live, len(want[m]), len(held), tuple(sorted(want[m] - held)), tuple(sorted(held - want[m]))
            )
        )
    for m in sorted(have):
        if m not in as_planned:
            members.append(MemberDiff(None, m, 0, len(have[m]), (), tuple(sorted(have[m]))))
    planned_owner = {tp: m for m, tps in want.items() for tp in tps}
    holders: dict[TP, list[str]] = {}
    for live, tps in have.items():
        for tp in tps:
            holders.setdefault(tp, []).append(name[live])
    unowned = tuple(sorted(tp for tp in planned_owner if tp not in holders))
    wrong = tuple(
        (tp, planned_owner[tp], tuple(sorted(h)))
        for tp, h in sorted(holders.items())
        if tp in planned_owner and planned_owner[tp] not in h
    )
    twice = tuple((tp, tuple(sorted(h))) for tp, h in sorted(holders.items()) if len(h) > 1)
    unplanned = tuple((tp, tuple(sorted(h))) for tp, h in sorted(holders.items()) if tp not in planned_owner)
    notes = [] if real.members else [f"the group has no live members (state {real.state})"]
    return PlanDiff(
        group_id=real.group_id,
        state=real.state,
        members=tuple(members),
        unowned=unowned,
        wrong_member=wrong,
        owned_twice=twice,
        unplanned=unplanned,
        planned_locality=explain(planned, planned_racks, snapshot, racks, fetch_mode),
        live_locality=explain(real.assignment(), live_racks, snapshot, racks, fetch_mode),
        notes=tuple(notes),
    )
