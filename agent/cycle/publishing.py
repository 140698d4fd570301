"""Publish plans, handover targets and tombstones; :func:`commit_plan` is the one way a publish outcome lands.

Every path that puts a record on the plan topic (a new plan, the target
completing a handover, a tombstone, a plan whose timed-out publish turned out
delivered) ends in :func:`commit_plan`: the plan book, the key's handover, its
tombstone and metrics flags and the plan metrics move together, never on one
path only.
"""

from __future__ import annotations

import dataclasses

from ..ha.lease import LeaseUnconfirmed
from ..kafka.exceptions import DeliveryUncertain, PlanTooLargeError, PublishError
from ..metrics import declared as metric
from ..planning.handover import Pending
from ..planning.planner import Registration
from ..protocol.plans import STATE_REVOKING, PlanRecord, encode_value, utc_now_iso
from ..state.term import CycleReport, Term, Wiring, labels
from .exhausted import generation_exhausted


def handover_metrics(w: Wiring, term: Term) -> None:
    w.metrics.set(metric.HANDOVERS_PENDING, term.handover_count())


def commit_plan(w: Wiring, term: Term, key: str, rec: PlanRecord | None, *, counted: bool = True) -> bool:
    """``rec`` (None: a tombstone) is on the plan topic: make it the plan of record; False when stale.

    A revoking plan starts a handover (its target follows once the releases are
    in); anything else ends the key's handover.  ``counted``: the publish is
    counted in the plan metrics (not for a plan whose publish was already
    reported failed and that turned out delivered).
    """
    if not term.book.apply(key, rec):
        return False
    g = term.group(key)
    if rec is not None and rec.state == STATE_REVOKING and rec.handover is not None:
        g.handover = Pending(rec, tuple(rec.handover["awaiting"]), w.clock())
    else:
        g.handover = None
    handover_metrics(w, term)
    if not counted:
        return True
    g.tombstone_pending = False
    sent = w.settings.mode != "observe"  # an observer's records are withheld: none was published
    if rec is None:
        if sent:
            w.metrics.inc(metric.TOMBSTONES_PUBLISHED_TOTAL, {"kind": labels(key)["kind"]})
        return True
    if sent:
        w.metrics.inc(metric.PLANS_PUBLISHED_TOTAL, {"kind": rec.kind})
    w.metrics.set(metric.PLAN_GENERATION, rec.generation, labels(key))
    g.metrics_pending = True
    return True


def publish_plans(
    w: Wiring,
    term: Term,
    records: list[tuple[PlanRecord, Registration]],
    report: CycleReport,
    *,
    watched: bool,
) -> dict[str, PlanRecord | None]:
    """Publish each plan, confirmed; returns the plans of record they replaced.

    ``watched``: the plan topic is read back, so a confirmed value is kept to be
    recognised there without decoding.
    """
    replaced: dict[str, PlanRecord | None] = {}
    if not records:
        return replaced
    assert w.publisher is not None, "start() first"
    s = w.settings
    try:
        w.guard()
    except LeaseUnconfirmed as e:
        w.log.warning("lease not confirmed; plans wait for the next cycle", error=str(e))
        for rec, _reg in records:
            g = term.group(rec.key)
            g.retry = True
            g.unpublished_reason = rec.reason
        return replaced
    # One batch, one wait for the brokers: each plan still succeeds or fails on its own.
    values: list[tuple[str, bytes | None]] = [(rec.key, encode_value(rec)) for rec, _reg in records]
    outcomes = w.publisher.publish_each(s.plan_topic, values, s.io_timeout_s)
    for (key, value), outcome in zip(values, outcomes, strict=True):
        if outcome is None and value is not None and watched:
            term.group(key).sent = value  # read back next cycle without decoding (see watch.watch_plans)
    for (rec, _reg), outcome in zip(records, outcomes, strict=True):
        g = term.group(rec.key)
        try:
            if outcome is not None:
                raise outcome
        except PlanTooLargeError as e:
            w.log.error("plan too large to publish", key=rec.key, error=str(e))
            w.metrics.inc(metric.PUBLISH_FAILURES_TOTAL, {"record": "plan"})
            report.skipped[rec.key] = str(e)
            continue
        except PublishError as e:
            w.log.error("plan not confirmed; will retry", key=rec.key, error=str(e))
            w.metrics.inc(metric.PUBLISH_FAILURES_TOTAL, {"record": "plan"})
            g.retry = True
            g.unpublished_reason = rec.reason
            if isinstance(e, DeliveryUncertain):
                doubt(w, term, rec)
            continue
        g.unpublished_reason = None
        g.in_doubt = None
        g.reassert, g.reassert_plan = False, None
        replaced[rec.key] = term.book.latest(rec.key)
        commit_plan(w, term, rec.key, rec)
        report.published.append(rec)
        _log_published(w, rec)
    return replaced


def _log_published(w: Wiring, rec: PlanRecord) -> None:
    before = rec.locality_before
    w.log.info(
        "plan withheld" if w.settings.mode == "observe" else "plan published",
        key=rec.key,
        generation=rec.generation,
        moved=rec.moved,
        reason=rec.reason,
        cross_rack_before=None if before is None else before.cross_rack,
        cross_rack_after=rec.locality_after.cross_rack,
        cross_rack_fraction_before=None if before is None else round(before.fraction, 4),
        cross_rack_fraction_after=round(rec.locality_after.fraction, 4),
        state=rec.state,
        **({} if rec.handover is None else {"awaiting": rec.handover.get("awaiting")}),
    )


def doubt(w: Wiring, term: Term, rec: PlanRecord) -> None:
    """A plan whose publish timed out may still land: its generation names its content for good.

    The retry re-sends the same bytes if the plan still holds then (same
    cluster and registration fingerprints), else plans the next generation.
    """
    term.group(rec.key).in_doubt = rec
    if term.book.reserve(rec.key, rec.generation):  # not again when the same record is re-sent
        w.metrics.inc(metric.GENERATIONS_RESERVED_TOTAL, {"reason": "uncertain_delivery"})
    w.log.warning(
        "plan delivery uncertain: its generation is never reused for another content",
        key=rec.key,
        generation=rec.generation,
    )


def publish_tombstones(w: Wiring, term: Term) -> list[str]:
    """Tombstones of unregistered keys (a key registered again meanwhile keeps its plan)."""
    pending = term.where(lambda g: g.tombstone_pending)
    if not pending:
        return []
    live = term.registered()
    keys = [k for k in pending if k not in live and term.book.latest(k) is not None]
    for k in pending:
        term.groups[k].tombstone_pending = k in keys
    if not keys or w.publisher is None:
        return []
    s = w.settings
    try:
        w.guard()
        w.publisher.publish_many(s.plan_topic, [(k, None) for k in keys], s.io_timeout_s)
    except PublishError as e:
        w.metrics.inc(metric.PUBLISH_FAILURES_TOTAL, {"record": "tombstone"})
        w.log.error("tombstones not confirmed; will retry", keys=keys, error=str(e))
        return []
    for k in keys:
        term.groups[k].tombstone_pending = False
        commit_plan(w, term, k, None)
    w.log.info("tombstones withheld" if s.mode == "observe" else "plans tombstoned", keys=keys)
    return keys


def advance_handovers(w: Wiring, term: Term) -> list[PlanRecord]:
    """Publish the target of every handover whose releases are in (or whose release timeout passed)."""
    done: list[PlanRecord] = []
    pending_all = list(term.handovers())
    if not pending_all or w.publisher is None:
        return done
    s = w.settings
    now = w.clock()
    live = term.registered()
    for key, pending in pending_all:
        g = term.group(key)
        reg = live.get(key)
        if reg is None:  # unregistered meanwhile: its tombstone ends the handover
            g.handover = None
            continue
        if now < g.handover_retry_at:
            continue
        followers = term.store.followers(reg.kind, reg.name)
        outstanding = pending.outstanding(followers)
        waited = now - pending.started
        if outstanding and waited < s.followers.release_timeout_s:
            continue
        if term.book.exhausted(key):  # a target above 2**53-1 would be refused by every reader
            generation_exhausted(w, term, key, None)
            continue
        target = dataclasses.replace(
            pending.target(
                term.book.next_generation(key), utc_now_iso(now), outstanding, pending.left(followers)
            ),
            publisher=w.publisher_info(),
        )
        try:
            w.guard()
            w.publisher.publish(s.plan_topic, key, encode_value(target), s.io_timeout_s)
        except PublishError as e:
            if isinstance(e, DeliveryUncertain):  # the retry's target goes above it
                term.book.reserve(key, target.generation)
                w.metrics.inc(metric.GENERATIONS_RESERVED_TOTAL, {"reason": "uncertain_delivery"})
            g.handover_retry_at = now + s.poll_interval_s
            w.metrics.inc(metric.PUBLISH_FAILURES_TOTAL, {"record": "plan"})
            w.log.error("handover target not confirmed; will retry", key=key, error=str(e))
            continue
        g.handover_retry_at = float("-inf")
        g.handover = None
        commit_plan(w, term, key, target)
        done.append(target)
        w.metrics.inc(metric.HANDOVERS_TOTAL, {"result": "timed_out" if outstanding else "completed"})
        log = w.log.warning if outstanding else w.log.info
        log(
            "handover completed" if not outstanding else "handover completed without every release",
            key=key,
            generation=target.generation,
            revoking_generation=pending.generation,
            waited_s=round(waited, 3),
            timed_out=outstanding,
        )
    handover_metrics(w, term)
    return done
