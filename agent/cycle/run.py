"""One cycle, as named steps in the one direction data flows: snapshot -> diff -> plan -> publish -> alert.

:func:`run_cycle` is the whole of it; each step takes the values the previous
one returned.  What persists between cycles is in :class:`~.state.Term` (one
:class:`~.state.GroupRecord` per plan key); what the steps talk to is in
:class:`~.state.Wiring` and :class:`CycleIO`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..alerts.webhook import WebhookNotifier
from ..cluster.diff import SnapshotDiff, diff, hold_reassignments
from ..cluster.metadata import MetadataError, Snapshot, fetch_snapshot, known_racks, poll_snapshot
from ..core.ports import AdminPort
from ..groups.live import describable
from ..groups.live import live_locality as judge_live
from ..metrics import declared as metric
from ..planning.planner import Registration
from ..protocol.alerts import AlertEvent
from ..protocol.plans import CONSUMER, STREAMS, PlanKey, PlanRecord
from ..state.term import CycleReport, Racks, Term, Wiring, labels
from ..traffic.publish import TrafficFeed
from ..traffic.sampler import TrafficMeter
from ..traffic.selector import SelectorCheck
from .alerting import emit_alerts, evaluate_alerts, resend_held
from .broker_groups import achievable, classify_groups, judge
from .checks import check_registrations
from .cycle_metrics import basis_metrics, change_metrics, group_metrics, snapshot_metrics
from .intake import Intake
from .plan_step import candidates, plan_group, rejoin_wanted
from .publishing import advance_handovers, publish_plans, publish_tombstones
from .traffic_feed import feed_traffic
from .traffic_step import check_selector, measure, priced, traffic_due, traffic_metrics


class SnapshotSource:
    """Complete metadata snapshots from the admin client, broker racks cached (asked again every
    ``metadata.rack_refresh_s``, and for brokers not seen before); the agent's own topics left out."""

    def __init__(self, w: Wiring, admin: AdminPort, own_topics: frozenset[str]) -> None:
        self.w = w
        self.admin = admin
        self.own_topics = own_topics
        #: broker id -> rack as DescribeCluster last said: asked again only for brokers not in it
        self.rack_cache: dict[int, str | None] = {}
        self.racks_asked_at = time.monotonic()

    def poll(self) -> Snapshot:
        """A complete snapshot, retried with backoff; :class:`MetadataError` when none could be had."""
        w = self.w
        s = w.settings

        def retrying(attempt: int, delay: float, err: MetadataError) -> None:
            w.log.warning(
                "metadata poll failed; retrying", attempt=attempt, delay_s=round(delay, 3), error=str(err)
            )

        def sleep(seconds: float) -> None:
            w.stop.wait(seconds)  # a stop request cuts a retry backoff short

        polled_at = time.monotonic()
        if polled_at - self.racks_asked_at >= s.metadata.rack_refresh_s:
            self.rack_cache.clear()  # every rack asked again: a restart inside one poll changes no broker id
            self.racks_asked_at = polled_at
        try:
            return poll_snapshot(
                self.admin,
                s.metadata,
                sleep=sleep,
                on_retry=retrying,
                exclude=self.own_topics,
                fetch=lambda admin, ms, ex: fetch_snapshot(admin, ms, ex, rack_cache=self.rack_cache),
            )
        finally:
            w.metrics.observe(metric.POLL_DURATION_SECONDS, time.monotonic() - polled_at)


@dataclass
class CycleIO:
    """What a cycle reads from and writes to besides the publisher: set up by the agent's start-up."""

    snapshots: SnapshotSource
    intake: Intake
    #: end offsets sampled each cycle for traffic (None: ``traffic.enabled`` is off)
    traffic: TrafficMeter | None = None
    #: the brokers' replica.selector.class, asked when due (None: traffic.replica_selector_check_s is 0)
    selector: SelectorCheck | None = None
    webhook: WebhookNotifier | None = None
    alerts_topic_ok: bool = True
    #: the plan topic is read back each cycle (a confirmed value is kept to recognise it)
    plans_watched: bool = False
    #: the broker plugins' traffic feed (None: not published: traffic off, no traffic_topic, observe mode)
    traffic_feed: TrafficFeed | None = None
    traffic_topic_ok: bool = True


@dataclass(frozen=True)
class Observed:
    """The diff step's answer: the snapshot, its racks, and the change it confirmed (if any)."""

    snap: Snapshot
    racks: Racks
    #: a change seen in this poll (confirmed or not)
    seen: SnapshotDiff | None
    #: the change confirmed this cycle, and the acted snapshot it replaced
    change: SnapshotDiff | None
    previous: tuple[Snapshot, Racks] | None
    pending_polls: int
    #: the snapshot to archive once this cycle's registrations are merged (the first, or a confirmed change)
    archive: tuple[Snapshot, Racks] | None = None


def run_cycle(w: Wiring, term: Term, io: CycleIO) -> CycleReport:
    """Registrations in, then snapshot -> diff -> plan -> publish -> alert."""
    io.intake.read(term, w.settings.registrations.read_timeout_s)
    try:
        snap = io.snapshots.poll()
    except MetadataError as e:
        age = None if term.last_good is None else round(w.clock() - term.last_good.taken_at, 3)
        w.log.error("metadata poll failed; keeping the last good snapshot", error=str(e), snapshot_age_s=age)
        resend_held(term, io.webhook, w.clock())  # the agent still holds them firing: they must not expire
        return CycleReport(ok=False, error=str(e))
    seen = observe(w, term, snap)
    measure(term, io.traffic, seen.snap)
    check_selector(w, term, io.selector, seen.snap)
    report = CycleReport(ok=True, snapshot=seen.snap, change=seen.seen, pending_polls=seen.pending_polls)
    report.confirmed = seen.change is not None
    io.intake.refresh(term, report, describe_wanted(term, io.intake.discovery, w.kip1071))
    to_archive = seen.archive
    if to_archive is None and term.traffic and not term.traffic_archived:
        to_archive = term.acted  # the first window of measured traffic: the fleet gets its bytes
    if to_archive is not None:
        archive(w, *to_archive, term.regs, term.traffic)
        term.traffic_archived = term.traffic_archived or bool(term.traffic)
    assert term.acted is not None
    acted_snap, acted_racks = term.acted  # what plans, live figures and alerts are judged under
    live_locality(w, term, report, acted_snap, acted_racks)
    classify_groups(w, term)
    report.completed += advance_handovers(w, term)
    achievable(w, term, report, acted_snap, acted_racks)
    check_registrations(w, term, acted_snap)
    previous_fp = {k: g.fp for k, g in term.groups.items()} if seen.change is not None else {}
    records = plan(w, term, seen.change, report, acted_snap, acted_racks)
    replaced = publish_plans(w, term, records, report, watched=io.plans_watched)
    report.tombstoned += publish_tombstones(w, term)
    feed_traffic(w, term, io.traffic_feed)
    group_metrics(w.metrics, term, acted_snap, acted_racks)
    basis_metrics(w.metrics, term, report)
    if io.traffic is not None:
        traffic_metrics(w, term, acted_snap, acted_racks)
    now = w.clock()
    published = {r.key for r in report.published}
    broker_events, broker_keys = judge(w, term, report)
    events = (
        report.alerts
        + broker_events
        + evaluate_alerts(
            w,
            term,
            [rec for rec, _ in records if rec.key in published],
            replaced,
            seen.change,
            seen.previous,
            previous_fp,
            acted_snap,
            acted_racks,
            judged=broker_keys,
        )
    )
    report.alerts = send_alerts(w, term, io, events, replaced, acted_snap, acted_racks, now)
    return report


def send_alerts(
    w: Wiring,
    term: Term,
    io: CycleIO,
    events: list[AlertEvent],
    replaced: Mapping[str, PlanRecord | None],
    snap: Snapshot,
    racks: Racks,
    now: float,
) -> list[AlertEvent]:
    """The alert step's end: this cycle's events priced, the firing alerts held with their current values
    and price (what a re-send carries), and the events sent; returns the events sent."""
    events = priced(w, term, events, replaced, snap, racks)
    term.alerts.hold(priced(w, term, term.alerts.firing_events(), replaced, snap, racks))
    emit_alerts(w, term, events, now, io.webhook, io.alerts_topic_ok)
    return events


def observe(w: Wiring, term: Term, polled: Snapshot) -> Observed:
    """The diff step: hold reassignments, resolve racks, and let a change count once it persisted."""
    snap = polled if term.acted is None else hold_reassignments(term.acted[0], polled)
    term.known = known_racks(term.known, snap)
    racks = snap.resolve_racks(term.known)
    term.last_good = snap
    snapshot_metrics(w.metrics, snap, racks)
    if term.acted is None:
        term.acted = (snap, racks)
        w.log.info(
            "first snapshot",
            brokers=len(snap.brokers),
            topics=len(snap.topics),
            partitions=snap.partition_count(),
        )
        return Observed(snap, racks, None, None, None, 0, archive=(snap, racks))
    d = diff(term.acted[0], snap, term.acted[1], racks)
    confirmed = term.debounce.observe(not d.empty, (snap, racks))
    seen = None if d.empty else d
    if confirmed is not None:
        previous, term.acted = term.acted, confirmed
        change_metrics(w.metrics, d)
        w.log.info("metadata change confirmed", changes=d.counts(), reason=d.reason(limit=5))
        return Observed(snap, racks, seen, d, previous, term.debounce.pending_polls, archive=confirmed)
    if not d.empty:
        w.log.info(
            "metadata change seen; waiting for it to persist",
            changes=d.counts(),
            seen_polls=term.debounce.pending_polls,
            required_polls=term.debounce.polls,
        )
    return Observed(snap, racks, seen, None, None, term.debounce.pending_polls)


def archive(
    w: Wiring, snap: Snapshot, racks: Racks, regs: list[Registration], traffic: Mapping[str, Sequence[float]]
) -> None:
    """History for the fleet job: one snapshot line per confirmed change, and one when traffic is first
    measured, with every group the agent plans (``regs``: the file's, the registrations topic's,
    discovered) and the measured bytes/s (``traffic``), under Kafka's cluster id; never fatal."""
    s = w.settings
    if s.archive_dir is None:
        return
    try:
        from ..cluster.archive import append_archive, build_snapshot, fleet_cluster_id

        fits = {
            t: list(v)
            for t, v in traffic.items()
            if t in snap.topics and len(v) == len(snap.topics[t].replicas)
        }
        doc = build_snapshot(fleet_cluster_id(snap, s), snap, racks, s, traffic=fits, regs=regs)
        path = append_archive(doc, s.archive_dir)
    except Exception as e:  # a full disk must not stop planning
        w.log.error("snapshot not archived", directory=str(s.archive_dir), error=str(e))
    else:
        w.log.info("snapshot archived", path=str(path))


def describe_wanted(
    term: Term, discovery: list[str], broker_streams: frozenset[str] = frozenset()
) -> list[str]:
    """Consumer groups whose real membership this cycle needs: every registered one, whose path (classic,
    KIP-848) may change at any time (a rolling upgrade) and whose live assignment is judged each cycle when
    the broker assigns it (DescribeConsumerGroups takes up to ``batch_size`` groups per request); and every
    classic Streams app, a consumer-protocol group named by its application id (``broker_streams``: the
    KIP-1071 ones, which DescribeConsumerGroups cannot describe)."""
    want = set(discovery)
    want.update(reg.name for reg in term.regs if reg.kind == CONSUMER)
    want.update(r.name for r in term.regs if r.kind == STREAMS and r.name not in broker_streams)
    want.update(e.name for e in term.store.entries() if e.kind == CONSUMER)  # merged after describing
    want.update(e.name for e in term.store.entries() if e.kind == STREAMS and e.name not in broker_streams)
    tracked = (PlanKey.split(k) for k in term.alerts.tracked() if "/" in k)
    want.update(k.name for k in tracked if k.kind == CONSUMER)
    return sorted(want)


#: the series of a group's live figure, all set or all gone
LIVE_METRICS = (
    metric.LIVE_CROSS_RACK_PARTITIONS,
    metric.LIVE_ASSIGNED_PARTITIONS,
    metric.LIVE_UNKNOWN_RACK_PARTITIONS,
)

#: what to do about a live member of unknown rack, by the kind of group
UNKNOWN_RACK_HINTS = {
    CONSUMER: "register the member (rackplan.member.id equal to its client.id, or group.instance.id) "
    "or add a rack_mapping rule",
    STREAMS: "register the Streams client under a process id its client.id names (client.id <process id> "
    "or Kafka's default <application.id>-<process id>) or add a rack_mapping rule",
}


def live_locality(w: Wiring, term: Term, report: CycleReport, snap: Snapshot, racks: Racks) -> None:
    """Locality of the live assignments described this cycle (what the brokers say members read).

    ``snap``: the acted snapshot, the one the plans were made from, never an unconfirmed poll: a metadata
    flap the debounce has not confirmed must not page a broker-assigned group (judged on this figure) when
    it would not page a classic one.  The KIP-1071 apps (``w.kip1071``) are never described.  A group
    described with nobody holding a partition has no live figure: its series go (nothing reads anything,
    not the last description's counts).  Partitions of members whose rack cannot be established are counted apart
    (``rackplan_live_unknown_rack_partitions``), never as local; the members are logged once per distinct
    set.
    """
    for reg in sorted(term.regs, key=lambda r: r.key):
        real = describable(reg, term.real_groups, w.kip1071)
        if real is None:
            continue  # not described this cycle: the last description's figures are all there is
        g = term.group(reg.key)
        if not any(m.assignment for m in real.members):
            g.live = None
            for name in LIVE_METRICS:
                w.metrics.remove(name, labels(reg.key))
            continue
        loc = judge_live(snap, racks, reg, real, w.settings.rack_mapping)
        report.live[reg.key] = g.live = loc
        w.metrics.set(metric.LIVE_CROSS_RACK_PARTITIONS, loc.cross_rack, labels(reg.key))
        w.metrics.set(metric.LIVE_ASSIGNED_PARTITIONS, loc.total, labels(reg.key))
        w.metrics.set(metric.LIVE_UNKNOWN_RACK_PARTITIONS, loc.unknown_rack, labels(reg.key))
        if loc.unknown_members and g.unknown_logged != loc.unknown_members:
            w.log.warning(
                "live members of unknown rack; their partitions are not judged",
                key=reg.key,
                members=[
                    {"member_id": m.member_id, "client_id": m.client_id, "host": m.host}
                    for m in real.members
                    if m.member_id in loc.unknown_members
                ],
                partitions=loc.unknown_rack,
                hint=UNKNOWN_RACK_HINTS[reg.kind],
            )
        g.unknown_logged = loc.unknown_members


def plan(
    w: Wiring, term: Term, change: SnapshotDiff | None, report: CycleReport, snap: Snapshot, racks: Racks
) -> list[tuple[PlanRecord, Registration]]:
    """The plan step: the next plan of every registration the change touched, or that is due."""
    rejoin = rejoin_wanted(w, term)
    registered = term.registered()
    for key, g in term.groups.items():
        if g.reassert and key not in registered:
            g.reassert, g.reassert_plan = (
                False,
                None,
            )  # not ours to plan: reported (discrepancy), not answered
    due = candidates(term, change, rejoin)
    shifted = traffic_due(w, term) - {r.key for r in due}  # planned for measured traffic alone
    due += [r for r in term.regs if r.key in shifted]
    for g in term.groups.values():
        g.retry = False
    records: list[tuple[PlanRecord, Registration]] = []
    for reg in due:
        g = term.group(reg.key)
        if g.broker_assigned():  # its members ignore plans: judged against the plan instead (broker_groups)
            continue
        if g.handover is not None:  # one handover at a time: planned again once it completes
            g.retry = reg.key not in shifted  # traffic is weighed again in its next window
            continue
        rec = plan_group(
            w,
            term,
            reg,
            snap,
            racks,
            change,
            report,
            rejoin=reg.key in rejoin,
            reassert=g.reassert,
            traffic_only=reg.key in shifted,
        )
        if rec is not None:
            records.append((rec, reg))
    return records
