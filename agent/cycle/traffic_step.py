"""The cycle's traffic steps: measure, re-plan for traffic alone when it saves enough, and report the bytes.

- :func:`measure`: one end-offset sample of the registered groups' topics;
  ``term.traffic`` becomes the bytes/s of the window (empty: nothing measured).
- :func:`traffic_due`, :func:`traffic_shift`: a group that weighs bytes
  (:func:`~rackplan.agent.planning.traffic_input.wants_traffic`) is planned
  again at most once per ``traffic.window_s`` with the measured traffic, and
  that plan is published only when it saves at least
  ``traffic.replan_min_bytes_per_second`` cross-rack bytes/s *and*
  ``traffic.replan_min_fraction`` of the plan of record's; its record's
  reason starts ``traffic shifted:``.
- :func:`traffic_metrics`: per group, cross-rack bytes/s and dollars a month
  now and under the plan of record (metrics and /v1/plans).
- :func:`check_selector`: the brokers' ``replica.selector.class``; while some
  broker lacks the rack-aware selector, every bytes figure of a
  ``nearest-replica`` group is judged in leader mode (:func:`judged`), since
  its reads really go to the leader.  Its plans are not: see docs/agent.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..cluster.metadata import Snapshot
from ..core.ports import AdminPort, GroupOffsetsPort
from ..groups.live import registered_members
from ..groups.membership import member_racks
from ..metrics import declared as metric
from ..planning.fixable import floor_bytes
from ..planning.planner import PlanResult, Registration
from ..planning.traffic_figures import ByteLocality, live_bytes, plan_bytes, record_bytes
from ..planning.traffic_input import wants_traffic
from ..protocol.alerts import UNFIXABLE, AlertEvent
from ..protocol.plans import CONSUMER, PlanRecord
from ..state.term import Racks, Term, Wiring, labels
from ..traffic.pricing import dollars_per_month
from ..traffic.reads import GroupReads
from ..traffic.sampler import Traffic, TrafficMeter
from ..traffic.selector import STATES, SelectorCheck, judged_mode


def traffic_meter(w: Wiring, admin: AdminPort) -> TrafficMeter | None:
    """The agent's meter (None when ``traffic.enabled`` is off); a stop request cuts its retry backoff short."""

    def sleep(seconds: float) -> None:
        w.stop.wait(seconds)

    s = w.settings.traffic
    if not s.enabled:
        return None
    reads = GroupReads(admin, s, w.log) if s.group_reads and isinstance(admin, GroupOffsetsPort) else None
    return TrafficMeter(admin, s, w.log, sleep=sleep, reads=reads)


def traffic_checks(w: Wiring, admin: AdminPort) -> tuple[TrafficMeter | None, SelectorCheck | None]:
    """The agent's traffic meter and its check of the brokers' replica selector (each None when off)."""
    return traffic_meter(w, admin), selector_check(w, admin)


def selector_check(w: Wiring, admin: AdminPort) -> SelectorCheck | None:
    """The check of the brokers' replica selector (None when ``traffic.replica_selector_check_s`` is 0)."""

    def sleep(seconds: float) -> None:
        w.stop.wait(seconds)

    on = w.settings.traffic.replica_selector_check_s > 0
    return SelectorCheck(admin, w.settings.traffic, w.log, sleep=sleep) if on else None


def check_selector(w: Wiring, term: Term, check: SelectorCheck | None, snap: Snapshot) -> None:
    """``term.selector``: the live brokers' replica selector, asked when due; its state as a metric."""
    if check is None:
        return
    term.selector = check.check(list(snap.brokers))
    if term.selector is not None:
        for state in STATES:
            w.metrics.set(metric.REPLICA_SELECTOR, float(state == term.selector.state), {"state": state})


def judged(term: Term, reg: Registration) -> Registration:
    """``reg`` in the fetch mode its reads follow: ``leader`` when some broker lacks the rack-aware selector."""
    mode = judged_mode(reg.fetch_mode, None if term.selector is None else term.selector.state)
    return reg if mode == reg.fetch_mode else dataclasses.replace(reg, fetch_mode=mode)


def measure(term: Term, meter: TrafficMeter | None, snap: Snapshot) -> None:
    """Sample the end offsets of every registered group's topics; ``term.traffic`` = the window's bytes/s."""
    if meter is None:
        return
    parts = {t: len(snap.topics[t].replicas) for r in term.regs for t in r.topics if t in snap.topics}
    live = snap.brokers
    leaderless = [(t, p) for t in parts for p, b in enumerate(snap.topics[t].leaders) if b not in live]
    meter.sample(parts, leaderless)
    term.traffic = meter.traffic(parts)
    if meter.reads is not None:  # what each consumer group reads: its committed offsets, same window
        groups = {r.name: r.topics for r in term.regs if r.kind == CONSUMER}
        meter.reads.sample(groups, meter.clock())
        read = {
            g: meter.reads.traffic(g, {t: parts[t] for t in ts if t in parts}) for g, ts in groups.items()
        }
        term.reads = {g: t for g, t in read.items() if t}


def traffic_due(w: Wiring, term: Term) -> set[str]:
    """Keys of groups that weigh bytes, have a plan of record and measured traffic, and were not weighed
    against a new plan in the last ``traffic.window_s`` (marked weighed now)."""
    out: set[str] = set()
    if not term.traffic:
        return out
    now = w.clock()
    for reg in term.regs:
        if not wants_traffic(reg.kind, reg.spec) or term.book.latest(reg.key) is None:
            continue
        g = term.group(reg.key)
        if (
            any(t in term.traffic for t in reg.topics)
            and now - g.traffic_checked_at >= w.settings.traffic.window_s
        ):
            g.traffic_checked_at = now
            out.add(reg.key)
    return out


def _assignment(document: Mapping[str, Any]) -> Mapping[str, Any]:
    body = document.get("consumer_group") or document.get("streams_app") or {}
    return body.get("assignment") or {}


def traffic_shift(
    w: Wiring,
    term: Term,
    reg: Registration,
    snap: Snapshot,
    racks: Racks,
    last: PlanRecord | None,
    result: PlanResult,
) -> str | None:
    """The reason of a plan made for traffic alone, or None when it saves too little to publish."""
    if last is None:
        return None
    reg = judged(term, reg)
    old = record_bytes(snap, racks, reg, last, term.traffic)
    new = plan_bytes(snap, racks, reg, _assignment(result.document), term.traffic)
    saved, s = old.saved_by(new), w.settings.traffic
    fraction = saved / old.cross_rack_bytes_per_s if old.cross_rack_bytes_per_s > 0 else 0.0
    if saved <= 0 or saved < s.replan_min_bytes_per_second or fraction < s.replan_min_fraction:
        w.log.debug("plan for traffic held: too little saved", key=reg.key, saved_bytes_per_s=round(saved, 1))
        return None
    return (
        f"traffic shifted: cross-rack bytes/s {old.cross_rack_bytes_per_s:.0f} -> "
        f"{new.cross_rack_bytes_per_s:.0f} (saves {saved:.0f}, {fraction:.0%})"
    )


def current_bytes(
    w: Wiring, term: Term, reg: Registration, snap: Snapshot, racks: Racks, traffic: Traffic
) -> ByteLocality | None:
    """Bytes/s of the group's live assignment (members of known rack) when it was described, else None."""
    real = term.real_groups.get(reg.name) if reg.kind == CONSUMER else None
    if real is None or not any(m.assignment for m in real.members):
        return None
    mr = member_racks(real, registered_members(reg), w.settings.rack_mapping)
    known = {m: parts for m, parts in real.assignment().items() if m not in set(mr.unknown)}
    return live_bytes(snap, racks, reg, known, mr.racks, traffic)


def traffic_metrics(w: Wiring, term: Term, snap: Snapshot, racks: Racks) -> None:
    """Cross-rack bytes/s and dollars per month of each group, now and under its plan of record."""
    w.metrics.set(metric.TRAFFIC_PARTITIONS_MEASURED, sum(len(row) for row in term.traffic.values()))
    price = w.settings.prices.cross_az_per_gb
    for reg in map(lambda r: judged(term, r), term.regs):
        g, rec = term.group(reg.key), term.book.latest(reg.key)
        if rec is None or not any(t in term.traffic for t in reg.topics):
            if g.traffic is not None:
                for m in (metric.CROSS_RACK_BYTES_PER_SECOND, metric.CROSS_RACK_DOLLARS_PER_MONTH):
                    w.metrics.remove(m, labels(reg.key))
            g.traffic = None
            continue
        planned = record_bytes(snap, racks, reg, rec, term.traffic)
        live = current_bytes(w, term, reg, snap, racks, term.traffic)
        current = planned if live is None else live
        figures: dict[str, Any] = {"current_source": "plan" if live is None else "live"}
        figures["current"] = figure(w, reg.key, "current", current, price)
        figures["planned"] = figure(w, reg.key, "planned", planned, price)
        figures["read"] = read_figure(w, term, reg, rec, snap, racks)
        floor = floor_bytes(snap, racks, reg, rec, term.traffic)
        g.traffic = {**figures, **verdict(current.cross_rack_bytes_per_s, floor, price)}
        g.traffic["price_per_gb_each_way"] = price
        g.traffic["judged_fetch_mode"] = reg.fetch_mode
        g.traffic["replica_selector"] = None if term.selector is None else term.selector.state
        lab = {**labels(reg.key), "assignment": "floor"}
        w.metrics.set(metric.CROSS_RACK_BYTES_PER_SECOND, floor, lab)
        w.metrics.set(metric.CROSS_RACK_DOLLARS_PER_MONTH, dollars_per_month(floor, price), lab)


def figure(w: Wiring, key: str, name: str, b: ByteLocality, price: float) -> dict[str, Any]:
    """One assignment's bytes figures for /v1/plans, its cross-rack bytes/s and dollars set as metrics."""
    dollars = dollars_per_month(b.cross_rack_bytes_per_s, price)
    lab = {**labels(key), "assignment": name}
    w.metrics.set(metric.CROSS_RACK_BYTES_PER_SECOND, b.cross_rack_bytes_per_s, lab)
    w.metrics.set(metric.CROSS_RACK_DOLLARS_PER_MONTH, dollars, lab)
    return {
        "bytes_per_s": round(b.bytes_per_s, 3),
        "cross_rack_bytes_per_s": round(b.cross_rack_bytes_per_s, 3),
        "cross_rack_dollars_per_month": round(dollars, 2),
        "partitions_without_traffic": b.unknown,
    }


def read_figure(
    w: Wiring, term: Term, reg: Registration, rec: PlanRecord, snap: Snapshot, racks: Racks
) -> dict[str, Any] | None:
    """The current assignment at the rate the consumer group commits offsets (what it really reads), or
    None (its series removed) when it commits none for its topics: a report, never a plan's input."""
    reads = term.reads.get(reg.name) if reg.kind == CONSUMER else None
    if not reads:
        for m in (metric.CROSS_RACK_BYTES_PER_SECOND, metric.CROSS_RACK_DOLLARS_PER_MONTH):
            w.metrics.remove(m, {**labels(reg.key), "assignment": "read"})
        return None
    live = current_bytes(w, term, reg, snap, racks, reads)
    b = record_bytes(snap, racks, reg, rec, reads) if live is None else live
    return figure(w, reg.key, "read", b, w.settings.prices.cross_az_per_gb)


def verdict(current: float, floor: float, price: float) -> dict[str, Any]:
    """Whether assignment can help (issue 26 §5): no cross-rack bytes; fixable (how many bytes/s); or not
    fixable by assignment (the bytes/s that stay, on partitions no member's rack holds a replica of)."""
    if current <= 0:
        said = "no cross-rack bytes"
    elif current > floor:
        said = "fixable by assignment"
    else:
        said = "not fixable by assignment"
    return {
        "assignment_can_help": said,
        "fixable_cross_rack_bytes_per_s": round(max(0.0, current - floor), 3),
        "unfixable_cross_rack_bytes_per_s": round(floor, 3),
        "unfixable_cross_rack_dollars_per_month": round(dollars_per_month(floor, price), 2),
    }


def priced(
    w: Wiring,
    term: Term,
    events: list[AlertEvent],
    replaced: Mapping[str, PlanRecord | None],
    snap: Snapshot,
    racks: Racks,
) -> list[AlertEvent]:
    """``events`` with the cross-rack bytes/s of each group's current assignment and what they cost a month,
    where traffic is measured for the group (:func:`traffic_metrics` ran first this cycle).

    The current assignment is the alert's own: the live one where described, else the plan of record
    this cycle's plan replaced (what the group still reads), else the plan of record.
    """
    out = []
    regs = term.registered()
    for ev in events:
        g, reg, old = term.groups.get(ev.key), regs.get(ev.key), replaced.get(ev.key)
        if g is None or g.traffic is None or reg is None:
            out.append(ev)
            continue
        cross = g.traffic["current"]["cross_rack_bytes_per_s"]
        if ev.status == UNFIXABLE:  # what stays whatever the assignment
            cross = g.traffic["unfixable_cross_rack_bytes_per_s"]
        elif g.traffic["current_source"] == "plan" and old is not None:
            cross = record_bytes(snap, racks, judged(term, reg), old, term.traffic).cross_rack_bytes_per_s
        price = w.settings.prices.cross_az_per_gb
        out.append(
            dataclasses.replace(
                ev, cross_rack_bytes_per_s=cross, cross_rack_dollars_per_month=dollars_per_month(cross, price)
            )
        )
    return out
