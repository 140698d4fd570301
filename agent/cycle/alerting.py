"""The alert step: judge each group's locality (after a change, at start, while firing) and send the events.

Events go to structlog, the metrics, the webhook (queued, never waited for) and
the alerts topic.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ..alerts.webhook import WebhookNotifier
from ..cluster.diff import SnapshotDiff
from ..cluster.metadata import Snapshot
from ..groups.basis import live_decides
from ..groups.live import describable, live_locality
from ..kafka.exceptions import PublishError
from ..metrics import declared as metric
from ..planning.fixable import best_locality
from ..planning.planner import Registration, current_locality
from ..protocol.alerts import AlertEvent
from ..protocol.plans import Locality, PlanRecord
from ..state.term import Racks, Term, Wiring, labels


def assignment_loc(
    w: Wiring,
    term: Term,
    reg: Registration,
    rec: PlanRecord | None,
    snap: Snapshot,
    racks: Racks,
    fp: str | None = None,
) -> Locality | None:
    """The group's current assignment under ``snap``: the real one where described, else the plan of record.

    Of the real one, only the partitions of members whose rack is known
    (:mod:`.live`); when no member's is, the plan of record.

    ``fp``: the registration's scope fingerprint at ``snap`` when known; a
    plan made at that same scope already knows its locality.
    """
    real = describable(reg, term.real_groups, w.kip1071)
    if real is not None and any(m.assignment for m in real.members):
        live = live_locality(snap, racks, reg, real, w.settings.rack_mapping)
        if live_decides(live):
            return live.judged  # members of unknown rack are left out, never counted local
        # no live member's rack is known: the plan of record is all there is to judge
    if rec is None:
        return None
    if fp is not None and rec.cluster_fingerprint == fp and rec.registration_fingerprint == reg.fingerprint:
        return rec.locality_after
    return current_locality(snap, racks, reg, rec)


def best_loc(
    w: Wiring,
    term: Term,
    reg: Registration,
    rec: PlanRecord | None,
    snap: Snapshot,
    racks: Racks,
    current: Locality,
) -> Locality | None:
    """The floor no assignment beats, computed only when the threshold is crossed (it matters then).

    A firing alert asks every cycle; the floor depends only on the
    snapshot, the plan and the registration, so it is computed again only
    when one of them is another object (or registration) than last time.
    """
    if rec is None or current.fraction <= w.settings.alerts.cross_rack_threshold:
        return None
    g = term.group(reg.key)
    memo = g.best_memo
    if (
        memo is not None
        and memo[0] is snap
        and memo[1] is racks
        and memo[2] is rec
        and memo[3] == reg.fingerprint
    ):
        return memo[4]
    best = best_locality(snap, racks, reg, rec)
    g.best_memo = (snap, racks, rec, reg.fingerprint, best)
    return best


def evaluate_alerts(
    w: Wiring,
    term: Term,
    published: list[PlanRecord],
    replaced: Mapping[str, PlanRecord | None],
    change: SnapshotDiff | None,
    previous: tuple[Snapshot, Racks] | None,
    previous_fp: Mapping[str, str | None],
    snap: Snapshot,
    racks: Racks,
    judged: frozenset[str] | set[str] = frozenset(),
) -> list[AlertEvent]:
    """This cycle's alert events: after a confirmed change, initial states, and resolutions of firing alerts.

    Each group is judged once per cycle, in that order of precedence; ``judged``: groups judged already
    (broker-assigned ones, :mod:`.broker_groups`), left alone.
    """
    now = w.clock()
    evaluated: set[str] = set(judged)
    events: list[AlertEvent] = []
    if change is not None and previous is not None:
        events += _after_change(
            w, term, published, replaced, change, previous, previous_fp, snap, racks, now, evaluated
        )
    events += _initial_states(w, term, snap, racks, now, evaluated)
    events += _still_tracked(w, term, snap, racks, now, evaluated)
    return events


def _after_change(
    w: Wiring,
    term: Term,
    published: list[PlanRecord],
    replaced: Mapping[str, PlanRecord | None],
    change: SnapshotDiff,
    previous: tuple[Snapshot, Racks],
    previous_fp: Mapping[str, str | None],
    snap: Snapshot,
    racks: Racks,
    now: float,
    evaluated: set[str],
) -> list[AlertEvent]:
    """A confirmed change: the group's assignment (real, or its plan before this cycle) under old vs new."""
    events: list[AlertEvent] = []
    new_plans = {rec.key: rec for rec in published}
    tracked = set(term.alerts.tracked())
    for reg in term.regs:
        if reg.key in evaluated or change.touched_topics.isdisjoint(reg.topics):
            continue
        if reg.key in tracked and undescribed(term, reg):
            continue  # a live alert is not judged on a plan its members may not follow (_still_tracked)
        rec = new_plans.get(reg.key)
        old = replaced.get(reg.key) if rec is not None else term.book.latest(reg.key)
        g = term.groups.get(reg.key)
        fp_before, fp_now = previous_fp.get(reg.key), None if g is None else g.fp
        before = assignment_loc(w, term, reg, old, previous[0], previous[1], fp_before)
        if describable(reg, term.real_groups, w.kip1071) is not None:
            now_loc = assignment_loc(w, term, reg, old, snap, racks)
        elif rec is not None and rec.locality_before is not None:
            now_loc = rec.locality_before  # the planner counted the old plan under the new metadata
        elif fp_before is not None and fp_before == fp_now:
            now_loc = before  # same rack sets for this group: same locality
        else:
            now_loc = assignment_loc(w, term, reg, old, snap, racks, fp_now)
        if before is None or now_loc is None:
            continue
        evaluated.add(reg.key)
        if rec is not None:
            planned: Locality | None = rec.locality_after
        else:  # no new plan: the plan of record, when it was made at this scope
            planned = old.locality_after if old is not None and old.cluster_fingerprint == fp_now else None
        ev = term.alerts.evaluate(
            reg.key,
            before,
            now_loc,
            planned,
            change.reason(reg.topics, limit=5),
            now,
            best=best_loc(w, term, reg, rec or old, snap, racks, now_loc),
        )
        if ev is not None:
            events.append(ev)
    return events


def _initial_states(
    w: Wiring, term: Term, snap: Snapshot, racks: Racks, now: float, evaluated: set[str]
) -> list[AlertEvent]:
    """The initial state: a group already bad when the agent starts (or when it is registered) alerts once."""
    events: list[AlertEvent] = []
    regs = term.registered()
    for key in term.where(lambda g: g.initial_pending):
        initial, latest = regs.get(key), term.book.latest(key)
        if initial is None or latest is None:
            continue  # not planned yet: evaluated once it is
        g = term.groups[key]
        g.initial_pending = False
        if key in evaluated:
            continue
        loc = assignment_loc(w, term, initial, latest, snap, racks, g.fp)
        if loc is None:
            continue
        evaluated.add(key)
        ev = term.alerts.evaluate(
            key, loc, loc, latest.locality_after,
            f"initial state: {loc.cross_rack} of {loc.total} partitions read cross-rack", now,
            best=best_loc(w, term, initial, latest, snap, racks, loc),
        )  # fmt: skip
        if ev is not None:
            events.append(ev)
    return events


def _still_tracked(
    w: Wiring, term: Term, snap: Snapshot, racks: Racks, now: float, evaluated: set[str]
) -> list[AlertEvent]:
    """Firing alerts resolve once the group's assignment is local enough again; hold-downs run out; and a
    live assignment described this cycle is judged, changed or not (a rebalance moves partitions without a
    metadata change: 4 of 4 read cross-rack, plan all local, and nothing judged it).

    A group judged on its live assignment whose description failed this cycle is not judged (as a group
    the broker assigns, and as every group while the metadata poll fails): its plan of record, which its
    members may not follow, resolved a live alert, and nothing judged the group again once described."""
    events: list[AlertEvent] = []
    regs = term.registered()
    tracked = set(term.alerts.tracked())
    for key in sorted(tracked | _described_live(w, term)):
        if key in evaluated or key not in regs or undescribed(term, regs[key]):
            continue
        latest = term.book.latest(key)
        g = term.groups.get(key)
        loc = assignment_loc(w, term, regs[key], latest, snap, racks, None if g is None else g.fp)
        if loc is None:
            continue
        reason = (
            ""
            if key in tracked
            else f"live assignment: {loc.cross_rack} of {loc.total} partitions read cross-rack"
        )
        ev = term.alerts.evaluate(
            key, loc, loc, None if latest is None else latest.locality_after, reason, now,
            best=best_loc(w, term, regs[key], latest, snap, racks, loc),
        )  # fmt: skip
        if ev is not None:
            events.append(ev)
    return events


def _described_live(w: Wiring, term: Term) -> set[str]:
    """Groups with a plan of record judged on a live assignment described this cycle."""
    out = set()
    for reg in term.regs:
        g = term.groups.get(reg.key)
        if g is None or g.live is None or not live_decides(g.live) or term.book.latest(reg.key) is None:
            continue
        if describable(reg, term.real_groups, w.kip1071) is not None:
            out.add(reg.key)
    return out


def undescribed(term: Term, reg: Registration) -> bool:
    """Judged live when last described, and its description failed this cycle: nothing to judge it on."""
    g = term.groups.get(reg.key)
    return g is not None and g.live is not None and live_decides(g.live) and reg.name in term.undescribed


def emit_alerts(
    w: Wiring,
    term: Term,
    events: list[AlertEvent],
    now: float,
    webhook: WebhookNotifier | None,
    topic_ok: bool,
) -> None:
    """Send ``events``: log, metrics, webhook, and the alerts topic (when ``topic_ok``: it exists)."""
    m = w.metrics
    regs = term.registered()
    for ev in events:
        w.log.warning("locality alert", **ev.as_json())
        m.inc(metric.ALERTS_TOTAL, {"status": ev.status})
        if ev.status == "firing":
            m.set(metric.ALERTS_FIRING, 1, labels(ev.key))
        elif ev.key in regs:
            m.set(metric.ALERTS_FIRING, 0, labels(ev.key))
    if webhook is not None:
        webhook.notify(events, term.alerts.firing_events(), now)
    if events and w.publisher is not None and topic_ok:
        try:
            w.guard()
            w.publisher.publish_many(
                w.settings.alerts_topic,
                [(ev.key, json.dumps(ev.as_json(), separators=(",", ":")).encode()) for ev in events],
                w.settings.io_timeout_s,
            )
        except PublishError as e:
            w.log.error("alerts not published", error=str(e))
            m.inc(metric.PUBLISH_FAILURES_TOTAL, {"record": "alert"})
    unfixable = {tuple(sorted(labels(k).items())): 1.0 for k in term.alerts.unfixable() if k in regs}
    m.replace(metric.ALERTS_UNFIXABLE, {}, unfixable)


def resend_held(term: Term, webhook: WebhookNotifier | None, now: float) -> None:
    """A cycle without metadata (the poll failed): nothing is evaluated, but the firing alerts the agent
    still holds are re-sent on their schedule (``webhook.resend_interval_s``), with the values they were
    last judged with, so that Alertmanager does not let them expire while the agent says they fire
    (``rackplan_alerts_firing``), and they do not flap back once the metadata returns."""
    if webhook is not None:
        webhook.notify([], term.alerts.firing_events(), now)
