"""Metrics the cycle sets from values it already has: the snapshot, a confirmed change, plans, followers."""

from __future__ import annotations

from ..cluster.diff import REPLICA_RACKS, SnapshotDiff
from ..cluster.metadata import Snapshot
from ..groups.basis import locality_basis
from ..metrics import declared as metric
from ..metrics.registry import Metrics
from ..planning.planner import current_locality_by_rack, total_locality
from ..protocol.registrations import FOLLOWER_MODES
from ..state.term import CycleReport, Racks, Term, labels


def snapshot_metrics(m: Metrics, snap: Snapshot, racks: Racks) -> None:
    m.set(metric.SNAPSHOT_TIMESTAMP_SECONDS, snap.taken_at)
    m.set(metric.SNAPSHOT_PARTITIONS, snap.partition_count())
    m.set(metric.SNAPSHOT_TOPICS, len(snap.topics))
    per_rack: dict[tuple[tuple[str, str], ...], float] = {}
    for b in snap.brokers:
        lab = (("rack", racks.get(b) or ""),)
        per_rack[lab] = per_rack.get(lab, 0) + 1
    m.replace(metric.BROKERS, {}, per_rack)


def change_metrics(m: Metrics, d: SnapshotDiff) -> None:
    m.inc(metric.CHANGES_CONFIRMED_TOTAL)
    for kind, count in d.counts().items():
        m.inc(metric.METADATA_CHANGES_TOTAL, {"change": kind}, by=count)
    per_topic: dict[str, int] = {}
    for c in d.changes:
        if c.kind == REPLICA_RACKS and c.topic is not None:
            per_topic[c.topic] = per_topic.get(c.topic, 0) + 1
    for topic, count in sorted(per_topic.items()):
        m.inc(metric.TOPIC_RACK_CHANGES_TOTAL, {"topic": topic}, by=count)


def group_metrics(m: Metrics, term: Term, snap: Snapshot, racks: Racks) -> None:
    """Per-rack locality of plans of record that are new or replayed.

    A plan of record not republished after a change kept its scope
    fingerprint, hence its locality: nothing to recount.
    """
    keys = term.where(lambda g: g.metrics_pending)
    planned = {}
    for k, g in term.groups.items():
        if g.planned_by_rack is not None:
            planned[k] = g.planned_by_rack
            g.planned_by_rack = None
    regs = term.registered()
    for key in keys:
        g = term.groups[key]
        g.metrics_pending = False
        rec, reg = term.book.latest(key), regs.get(key)
        if rec is None or reg is None:
            continue
        by_rack = planned.get(key)
        if by_rack is None or rec.cluster_fingerprint != g.fp:
            by_rack = current_locality_by_rack(snap, racks, reg, rec)
        lab = labels(key)
        series: dict[tuple[tuple[str, str], ...], float] = {}
        for rack, loc in by_rack.items():
            for locality, value in (
                ("local", loc.total - loc.cross_rack),
                ("cross_rack", loc.cross_rack),
            ):
                one = {**lab, "rack": rack or "", "locality": locality}
                series[tuple(sorted(one.items()))] = value
        m.replace(metric.ASSIGNED_PARTITIONS, lab, series)
        total = total_locality(by_rack)
        m.set(metric.CROSS_RACK_PARTITIONS, total.cross_rack, lab)
        m.set(metric.CROSS_RACK_RATIO, total.fraction, lab)


def basis_metrics(m: Metrics, term: Term, report: CycleReport) -> None:
    """What each group's locality is judged on this cycle (:mod:`rackplan.agent.groups.basis`), kept for
    ``/v1/groups`` and as ``rackplan_locality_basis`` (1 per group); run once the groups' paths are known and
    this cycle's plans are published."""
    series: dict[tuple[tuple[str, str], ...], float] = {}
    for reg in term.regs:
        g = term.group(reg.key)
        g.basis = locality_basis(
            report.live.get(reg.key),
            on_broker=g.broker_assigned(),
            has_plan=term.book.latest(reg.key) is not None,
        )
        series[tuple(sorted({**labels(reg.key), "basis": g.basis}.items()))] = 1.0
    m.replace(metric.LOCALITY_BASIS, {}, series)


def follower_metrics(m: Metrics, term: Term) -> None:
    counts = dict.fromkeys(FOLLOWER_MODES, 0)
    for e in term.store.entries():
        if e.follower is not None:
            counts[e.follower.mode] += 1
    for mode, n in counts.items():
        m.set(metric.FOLLOWERS, n, {"mode": mode})


def forget_metrics(m: Metrics, key: str) -> None:
    """Series of a group no longer registered."""
    lab = labels(key)
    for name in (
        metric.CROSS_RACK_PARTITIONS,
        metric.CROSS_RACK_RATIO,
        metric.ASSIGNED_PARTITIONS,
        metric.PLAN_GENERATION,
        metric.ALERTS_FIRING,
        metric.LIVE_CROSS_RACK_PARTITIONS,
        metric.LIVE_ASSIGNED_PARTITIONS,
        metric.LIVE_UNKNOWN_RACK_PARTITIONS,
        metric.MEMBER_RACKS_UNKNOWN,
        metric.UNKNOWN_TOPIC_SUBSCRIPTIONS,
        metric.ACHIEVABLE_CROSS_RACK_PARTITIONS,
        metric.CROSS_RACK_BYTES_PER_SECOND,
        metric.CROSS_RACK_DOLLARS_PER_MONTH,
    ):
        m.remove(name, lab)


def term_metrics(m: Metrics) -> None:
    """A new leadership term starts from scratch: not ready, no discrepancy, and no series of any group.

    A group's series are set by the cycles of the term that knows the group; left from an earlier term
    (this agent led, stood by, and leads again), ``rackplan_alerts_firing`` stayed 1 for an alert the new
    term does not hold (the shipped rule RackplanLocalityAlertStuck paged for it), and a group unregistered
    meanwhile kept its locality and generation series for ever.
    """
    m.set(metric.PLAN_DISCREPANCIES, 0)
    m.set(metric.READY, 0)
    for declared in metric.DECLARED:
        if "group" in declared.labels:
            m.remove(declared, {})
