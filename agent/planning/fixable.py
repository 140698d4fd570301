"""Where assignment cannot help: the floor of cross-rack partitions no plan of a group goes below.

Kept apart from :mod:`.planner` (which makes plans) because it judges them:
the *unfixable* alert (:mod:`rackplan.agent.alerts.rules`) compares a group's
plan with this floor.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ..cluster.metadata import Snapshot
from ..protocol.plans import CONSUMER, Locality, PlanRecord
from .planner import LocalityJudge, Registration, _consumer_pairs, _streams_pairs, cluster_for


def _floor(
    snapshot: Snapshot, racks: Mapping[int, str | None], reg: Registration, last: PlanRecord
) -> Iterator[tuple[str, int, bool]]:
    """Every existing partition of the plan, and whether it is cross-rack for every rack of the group."""
    cluster = cluster_for(snapshot, racks, reg.topics)
    judge = LocalityJudge(cluster, snapshot, racks, reg.fetch_mode)
    assignment = last.body.get("assignment") or {}
    if reg.kind == CONSUMER:
        member_racks = {m.get("member_id"): m.get("rack") for m in reg.spec.get("members") or []}
        pairs = _consumer_pairs(assignment, member_racks)
        group_racks = set(member_racks.values())
    else:
        pairs = _streams_pairs(cluster, reg.spec, assignment)
        group_racks = {c.get("rack") for c in reg.spec.get("clients") or []}
    for _, t, p in pairs:
        verdicts = [judge.cross(r, t, p) for r in sorted(group_racks, key=lambda r: r or "")]
        if verdicts and verdicts[0] is not None:
            yield t, p, all(verdicts)


def best_locality(
    snapshot: Snapshot, racks: Mapping[int, str | None], reg: Registration, last: PlanRecord
) -> Locality:
    """The floor no assignment beats: partitions of the plan that no member's rack reads locally.

    A partition counts as cross-rack here only when it is cross-rack for every
    rack the group's members (or Streams clients) are in, so balance aside,
    no assignor can do better.  When this is above the alert threshold the
    group is *unfixable* by rebalancing (see :mod:`rackplan.agent.alerts.rules`).
    """
    cross = total = 0
    for _, _, always in _floor(snapshot, racks, reg, last):
        total += 1
        cross += always
    return Locality(cross, total)


def floor_bytes(
    snapshot: Snapshot,
    racks: Mapping[int, str | None],
    reg: Registration,
    last: PlanRecord,
    traffic: Mapping[str, tuple[float, ...]],
) -> float:
    """The cross-rack bytes/s no assignment avoids: the measured bytes/s of the partitions :func:`best_locality`
    counts (cross-rack for every rack of the group; e.g. rf 1 partitions in racks with no member)."""
    total = 0.0
    for t, p, always in _floor(snapshot, racks, reg, last):
        row = traffic.get(t)
        if always and row is not None and p < len(row):
            total += row[p]
    return total
