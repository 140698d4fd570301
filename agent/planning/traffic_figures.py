"""Bytes/s of an assignment under measured traffic: in total, and across racks (the figure that costs money).

The same judgement as the partition counts (:class:`~.planner.LocalityJudge`,
in the group's fetch mode), each partition weighed by its measured bytes/s.
A partition whose traffic is not measured counts 0 and is counted apart
(``unknown``), as the contract's ``partitions_without_traffic``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..cluster.metadata import Snapshot
from ..protocol.plans import CONSUMER, PlanRecord
from .planner import LocalityJudge, Registration, _consumer_pairs, _streams_pairs, cluster_for
from .traffic_input import Traffic


@dataclass(frozen=True, slots=True)
class ByteLocality:
    """An assignment's bytes/s: all it reads, what crosses racks, and partitions of unknown traffic."""

    bytes_per_s: float = 0.0
    cross_rack_bytes_per_s: float = 0.0
    unknown: int = 0

    def saved_by(self, other: ByteLocality) -> float:
        """Cross-rack bytes/s that ``other`` saves against this one (negative: it costs more)."""
        return self.cross_rack_bytes_per_s - other.cross_rack_bytes_per_s


def judge_bytes(
    judge: LocalityJudge, pairs: Iterable[tuple[str | None, str, int]], traffic: Traffic
) -> ByteLocality:
    """Sum bytes/s over ``(member rack, topic, partition)`` pairs whose partition exists."""
    total = cross = 0.0
    unknown = 0
    for rack, t, p in pairs:
        verdict = judge.cross(rack, t, p)
        if verdict is None:
            continue
        row = traffic.get(t)
        if row is None or p >= len(row):
            unknown += 1
            continue
        total += row[p]
        cross += row[p] if verdict else 0.0
    return ByteLocality(total, cross, unknown)


def plan_bytes(
    snapshot: Snapshot,
    racks: Mapping[int, str | None],
    reg: Registration,
    assignment: Mapping[str, Any],
    traffic: Traffic,
) -> ByteLocality:
    """Bytes/s of a plan's ``assignment`` (a consumer group's or a Streams app's, active tasks) under ``traffic``."""
    cluster = cluster_for(snapshot, racks, reg.topics)
    judge = LocalityJudge(cluster, snapshot, racks, reg.fetch_mode)
    if reg.kind == CONSUMER:
        member_racks = {m.get("member_id"): m.get("rack") for m in reg.spec.get("members") or []}
        return judge_bytes(judge, _consumer_pairs(assignment, member_racks), traffic)
    return judge_bytes(judge, _streams_pairs(cluster, reg.spec, assignment), traffic)


def record_bytes(
    snapshot: Snapshot, racks: Mapping[int, str | None], reg: Registration, rec: PlanRecord, traffic: Traffic
) -> ByteLocality:
    """:func:`plan_bytes` of a plan record."""
    return plan_bytes(snapshot, racks, reg, rec.body.get("assignment") or {}, traffic)


def live_bytes(
    snapshot: Snapshot,
    racks: Mapping[int, str | None],
    reg: Registration,
    assignment: Mapping[str, Sequence[Sequence[Any]]],
    member_racks: Mapping[str, str | None],
    traffic: Traffic,
) -> ByteLocality:
    """Bytes/s of a consumer group's live assignment (member id -> [topic, partition]); members of unknown
    rack are left out of ``member_racks`` by the caller and count neither local nor cross-rack."""
    topics = {t for parts in assignment.values() for t, _ in parts}
    judge = LocalityJudge(cluster_for(snapshot, racks, topics), snapshot, racks, reg.fetch_mode)
    return judge_bytes(judge, _consumer_pairs(assignment, member_racks), traffic)
