"""The plan step: which registrations to plan this cycle, and the next plan of each (or None: the plan holds)."""

from __future__ import annotations

from collections.abc import Mapping

from ..cluster.diff import SnapshotDiff
from ..cluster.metadata import Snapshot
from ..groups.paths import CLASSIC_FOLLOWERS, KIP848_BROKER, PLAN_READER, UNKNOWN
from ..metrics import declared as metric
from ..planning.handover import (
    TP,
    absent_unreleased,
    assignment_of,
    departed,
    revoking_record,
    split,
    still_unreleased,
    with_unreleased,
)
from ..planning.planner import (
    PlanResult,
    PlanSkipped,
    Registration,
    fingerprint_topics,
    plan_for,
    scope_fingerprint,
)
from ..protocol.plans import CONSUMER, PlanRecord, epoch_ms, utc_now_iso
from ..protocol.registrations import FollowerStatus
from ..state.term import CycleReport, Racks, SkipInputs, Term, Wiring
from .exhausted import generation_exhausted
from .traffic_step import traffic_shift


def rejoin_wanted(w: Wiring, term: Term) -> set[str]:
    """Follower groups with members in group subscription: they are brought back with a handover.

    At most once per 2 × ``followers.release_timeout_s`` per group, so
    followers that cannot come back (another consumer still in their group)
    are not asked every cycle.  An observer (``mode: observe``) asks each
    member back once while it stays in group subscription: its plans never
    reach the followers, so asking again would only show handovers acting
    would not make (found by a hunt: its generations climbed by two every gap).
    """
    out: set[str] = set()
    now = w.clock()
    gap = 2 * w.settings.followers.release_timeout_s
    observing = w.settings.mode == "observe"
    for reg in term.regs:
        g = term.groups.get(reg.key)
        if reg.kind != CONSUMER or (g is not None and g.handover is not None):
            continue
        followers = term.store.followers(reg.kind, reg.name)
        subscribed = frozenset(m for m, st in followers.items() if st.mode == "subscription")
        if g is not None:  # a member seen out of subscription is asked again if it falls back
            g.rejoin_asked &= subscribed
        if subscribed:
            g = term.group(reg.key)
            if observing and subscribed <= g.rejoin_asked:
                continue
            if now - g.rejoin_at >= gap:
                g.rejoin_at = now
                g.rejoin_asked |= subscribed
                out.add(reg.key)
    return out


def candidates(term: Term, change: SnapshotDiff | None, rejoin: set[str]) -> list[Registration]:
    """Registrations to plan this cycle: retried, rejoining, reasserted, touched by the change, or holding
    a plan rackplan's Java assignors refuse for being incomplete (:func:`plugin_applies`)."""
    out = []
    for r in term.regs:
        g = term.groups.get(r.key)
        if (
            (g is not None and (g.retry or g.reassert))
            or r.key in rejoin
            or (change is not None and not change.touched_topics.isdisjoint(r.topics))
            or _incomplete_for_plugin(term, r)
        ):
            out.append(r)
    return out


def scope_fp(term: Term, reg: Registration, snap: Snapshot, racks: Racks) -> str:
    """:func:`scope_fingerprint`, computed again only for another snapshot, rack map or registration.

    A registration retried every cycle (skipped, or waiting for a handover)
    would otherwise hash all its topics' partitions each time.
    """
    g = term.group(reg.key)
    memo = g.fp_memo
    if memo is not None and memo[0] is snap and memo[1] is racks and memo[2] == reg.fingerprint:
        return memo[3]
    fp = scope_fingerprint(snap, racks, fingerprint_topics(snap, reg), reg.fetch_mode)
    g.fp_memo = (snap, racks, reg.fingerprint, fp)
    return fp


def plugin_applies(term: Term, reg: Registration) -> bool:
    """The group's members assign with rackplan's Java plugins (its last known path's assignor is
    ``rackplan``): its plans are made complete, the cooperative follow-up folded in at once, as for plan
    followers.

    Both plugins apply only a plan that assigns every partition of the live subscription
    (``Plans.mismatch``), so the two-round form (fewer partitions, the rest under ``revoked``) is refused,
    and the group would be assigned without its plan until the next metadata change.  They need no two
    rounds: ``RackplanServerAssignor`` (KIP-848) hands the plan to the coordinator, whose reconciliation
    revokes before it reassigns; the classic ``RackplanAssignor`` leaves a partition another member still
    owns out of the round itself (its cooperative rule).  Found by a hunt: the contract's default assignor,
    cooperative-sticky, made every plan that moved a partition unusable to them.
    """
    g = term.groups.get(reg.key)
    if reg.kind != CONSUMER or g is None or g.path is None:
        return False
    path = g.known_path if g.path.path == UNKNOWN and g.known_path is not None else g.path
    return path.path in (KIP848_BROKER, CLASSIC_FOLLOWERS) and path.assignor == PLAN_READER


def _incomplete_for_plugin(term: Term, reg: Registration) -> bool:
    """The plan of record withholds partitions (``revoked``) but :func:`plugin_applies`: the plugin refuses
    it (made before the group moved onto ``rackplan``, or by an older agent), so a complete one is due."""
    last = term.book.latest(reg.key)
    return last is not None and bool(last.body.get("revoked")) and plugin_applies(term, reg)


def plan_group(
    w: Wiring,
    term: Term,
    reg: Registration,
    snap: Snapshot,
    racks: Racks,
    change: SnapshotDiff | None,
    report: CycleReport,
    rejoin: bool = False,
    reassert: bool = False,
    traffic_only: bool = False,
) -> PlanRecord | None:
    """The next plan of ``reg``, or None when the plan of record holds.

    For a group with plan-following members, or assigned by rackplan's Java
    assignors (:func:`plugin_applies`), the plan is complete (nothing
    withheld); with followers, when a partition moves away from a live one, it
    comes as the revoking phase of a two-phase handover.  ``rejoin``: its
    followers fell back to group subscription and must be brought back, so
    a plan is made even if nothing else changed.  ``reassert``: the newest
    record followers act on was written by someone else (a forged plan or
    tombstone); a plan above it is made even if nothing else changed, its
    handover judged against what the followers were told to hold.
    ``traffic_only``: only measured traffic asks for it (:mod:`.traffic_step`).
    """
    g = term.group(reg.key)
    last = term.book.latest(reg.key)
    fp = scope_fp(term, reg, snap, racks)
    g.fp = fp
    refill = _incomplete_for_plugin(term, reg)
    forced = rejoin or reassert or traffic_only or refill
    spared, again = _spared(term, reg, last, fp, forced=forced, rejoin=rejoin)
    if spared:
        return again
    if term.book.exhausted(reg.key):
        generation_exhausted(w, term, reg.key, report)
        return None
    followers = term.store.followers(reg.kind, reg.name) if reg.kind == CONSUMER else {}
    complete = bool(followers) or plugin_applies(term, reg)
    inputs = (reg.fingerprint, fp, last, complete)
    if not (rejoin or reassert) and _skipped_again(w, term, reg, inputs, report):
        return None
    g.skipped = None
    try:
        result = plan_for(snap, racks, reg, last, complete=complete, traffic=term.traffic)
    except Exception as e:  # an assignor bug must not stop the plans of other groups
        _planning_failed(w, term, reg, e, inputs, report)
        return None
    g.skip_logged = None
    if traffic_only:  # planned for traffic alone: published only when it saves enough
        why = traffic_shift(w, term, reg, snap, racks, last, result)
    else:
        why = _reason(
            reg, last, change, g.unpublished_reason, rejoin=rejoin, reassert=reassert, refill=refill
        )
    if why is None:
        return None
    g.planned_by_rack = result.after_by_rack
    rec = _record(w, term, reg, fp, why, result)
    return _with_followers(w, term, reg, rec, last, followers, reassert)


def _record(w: Wiring, term: Term, reg: Registration, fp: str, why: str, result: PlanResult) -> PlanRecord:
    """The next generation's record of ``result`` (its followers' handover not yet applied)."""
    return PlanRecord(
        key=reg.key,
        generation=term.book.next_generation(reg.key),
        cluster_fingerprint=fp,
        registration_fingerprint=reg.fingerprint,
        reason="; ".join([why, *term.group(reg.key).notes()]),
        created_at=utc_now_iso(w.clock()),
        document=result.document,
        moved=result.moved,
        fetch_mode=reg.fetch_mode,
        locality_before=result.before,
        locality_after=result.after,
        publisher=w.publisher_info(),
    )


def _with_followers(
    w: Wiring,
    term: Term,
    reg: Registration,
    rec: PlanRecord,
    last: PlanRecord | None,
    followers: Mapping[str, FollowerStatus],
    reassert: bool,
) -> PlanRecord:
    """``rec`` as a group with plan followers publishes it (one ever seen this term: :attr:`followed`): its
    revoking phase first when a live follower gives something up, and what holders that left (or have not
    confirmed the last plan, or may have applied one whose delivery is in doubt) may still read."""
    g = term.group(reg.key)
    g.followed = g.followed or bool(followers)
    if not g.followed:
        return rec  # no member ever followed plans: nobody to hand over to, or to withhold from
    held = last if last is not None else term.book.last_live(reg.key)  # a tombstone releases nothing
    if reassert and g.reassert_plan is not None:
        held = g.reassert_plan  # followers follow the forged plan: they hold what it gave
    target, held_body = assignment_of(rec.body), None if held is None else held.body
    handover = None if held is None else held.handover
    doubted = _in_doubt_holders(g.in_doubt, held)
    phase = split(target, held_body, followers, _merged(still_unreleased(handover, followers), doubted))
    if phase is not None:
        rec = revoking_record(rec, phase, w.settings.followers.release_timeout_s)
    # Listed again while the plan that listed them is younger than the registration TTL: the holder's
    # refresh, if it came back, may still be unread here; after that, a holder still absent is gone.
    made_ms = None if held is None else epoch_ms(held.created_at)
    recent = made_ms is not None and w.clock() * 1000 - made_ms <= w.settings.registrations.ttl_s * 1000
    carried = absent_unreleased(handover, followers) if recent else {}
    return with_unreleased(rec, departed(target, held_body, followers, _merged(carried, doubted)))


def _in_doubt_holders(doubt: PlanRecord | None, held: PlanRecord | None) -> dict[str, list[TP]]:
    """Who may hold what under a plan whose publish timed out, newer than the plan of record: it may have
    landed and been applied, so its assignees count as holders too (found by a hunt: a partition it gave
    moved on in one phase, before the read-back showed it had landed)."""
    if doubt is None or (held is not None and doubt.generation <= held.generation):
        return {}
    return _merged(assignment_of(doubt.body), assignment_of(doubt.body, "revoked"))


def _merged(*parts: Mapping[str, list[TP]]) -> dict[str, list[TP]]:
    """Member -> partitions of several such mappings, each member's sorted and without repeats."""
    out: dict[str, set[TP]] = {}
    for mapping in parts:
        for m, tps in mapping.items():
            out.setdefault(m, set()).update(tps)
    return {m: sorted(v) for m, v in sorted(out.items())}


def _planning_failed(
    w: Wiring, term: Term, reg: Registration, e: Exception, inputs: SkipInputs, report: CycleReport
) -> None:
    """Report, count and log (once per distinct reason) a plan that could not be made; retried next cycle."""
    g = term.group(reg.key)
    report.skipped[reg.key] = str(e) or repr(e)
    w.metrics.inc(metric.PLAN_FAILURES_TOTAL, {"kind": reg.kind})
    if g.skip_logged != report.skipped[reg.key]:  # once per distinct reason
        if isinstance(e, PlanSkipped):
            w.log.warning("plan skipped", key=reg.key, reason=str(e))
        else:
            w.log.error("planning failed", key=reg.key, error=repr(e), exc_info=True)
        g.skip_logged = report.skipped[reg.key]
    if isinstance(e, PlanSkipped):  # a verdict on these inputs, not a failure that may pass
        g.skipped = (inputs, report.skipped[reg.key])
    g.retry = True


def _spared(
    term: Term, reg: Registration, last: PlanRecord | None, fp: str, *, forced: bool, rejoin: bool
) -> tuple[bool, PlanRecord | None]:
    """Whether planning is spared, and then the record in doubt to re-send (None: the plan of record holds).

    ``forced``: a rejoin or reassert plans even when the plan of record holds.
    """
    doubt = term.group(reg.key).in_doubt
    if (
        doubt is not None
        and not rejoin
        and doubt.generation == term.book.next_generation(reg.key) - 1  # nothing above it since
        and doubt.cluster_fingerprint == fp
        and doubt.registration_fingerprint == reg.fingerprint
    ):
        return True, doubt  # the same record again, byte for byte: one generation, one content
    if (
        not forced
        and last is not None
        and last.cluster_fingerprint == fp
        and last.registration_fingerprint == reg.fingerprint
    ):
        return True, None  # the plan of record still holds
    return False, None


def _skipped_again(w: Wiring, term: Term, reg: Registration, inputs: SkipInputs, report: CycleReport) -> bool:
    """Skipped before on these very inputs (a topic missing, no members): the same reason again, without
    planning again.  Any change of the registration, its topics' racks or its plan of record plans it again."""
    g = term.group(reg.key)
    if g.skipped is None or g.skipped[0] != inputs:
        return False
    report.skipped[reg.key] = g.skipped[1]
    w.metrics.inc(metric.PLAN_FAILURES_TOTAL, {"kind": reg.kind})
    g.retry = True
    return True


def _reason(
    reg: Registration,
    last: PlanRecord | None,
    change: SnapshotDiff | None,
    unpublished: str | None,
    *,
    rejoin: bool,
    reassert: bool,
    refill: bool = False,
) -> str:
    """Why a plan is made: what its record's ``reason`` says (``refill``: :func:`_incomplete_for_plugin`)."""
    if reassert:
        return "the plan of record again, above a record another writer put on the plan topic"
    if rejoin:
        return "followers rejoin the plan after group subscription"
    if last is None:
        return "initial plan"
    if last.registration_fingerprint != reg.fingerprint:
        return "registration changed"
    if refill:
        return "the plan of record withholds partitions, which rackplan's Java assignors refuse"
    if change is not None:
        return change.reason(reg.topics, leaders=reg.fetch_mode == "leader") or "cluster changed"
    if unpublished is not None:
        return unpublished
    return "cluster changed while the agent was away"
