"""Records others wrote since the last cycle: on the plan topic (a foreign writer, a late record of ours) and on
the lease topic (another agent's heartbeat)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..core.errors import CannotRun
from ..cycle.publishing import commit_plan
from ..ha.lease import LeaseLost, foreign_writer
from ..kafka.publisher import LEASE_GROUP_HEADER, WRITER_HEADER
from ..kafka.tail import RawRecord, TopicTail
from ..metrics import declared as metric
from ..protocol.lease import HeartbeatError, decode_heartbeat
from ..protocol.mac import MAC_HEADER, check_mac
from ..protocol.plans import PlanDecodeError, PlanRecord, decode_record
from ..protocol.records import RecordError
from ..state.term import Term, Wiring, labels


def plan_skipped(w: Wiring, reason: str) -> None:
    w.metrics.inc(metric.RECORDS_SKIPPED_TOTAL, {"topic": "plans", "reason": reason})


def lease_skipped(w: Wiring, reason: str) -> None:
    w.metrics.inc(metric.RECORDS_SKIPPED_TOTAL, {"topic": "lease", "reason": reason})


def _discrepancies_metric(w: Wiring, term: Term) -> None:
    w.metrics.set(
        metric.PLAN_DISCREPANCIES, sum(1 for g in term.groups.values() if g.discrepancy is not None)
    )


def watch_plans(w: Wiring, term: Term, tail: TopicTail | None) -> None:
    """Records on the plan topic this agent did not write: a foreign writer is reported, never silent.

    With a secret (``registrations.secret_file``) a record is the agent's by content: a valid MAC
    (:mod:`rackplan.agent.protocol.mac`).  One without it is refused (:func:`_forged`): counted as a
    foreign writer and as skipped (``unsigned`` / ``bad_signature``), logged, never the plan of record,
    its generation never reserved; followers holding the secret refuse it too, so it moves nobody and
    is no discrepancy.  Its headers, copied or not, decide nothing.  Without a secret (unauthenticated
    records, as before), the headers are all there is:

    Every record the agent publishes carries :data:`WRITER_HEADER` (its id) and
    :data:`LEASE_GROUP_HEADER`.  A record without them, or from an agent outside our lease group,
    was written by someone else: a tool, a forger, an agent started with other settings.  It is
    counted (``rackplan_foreign_writers_total{topic="plans"}``) and logged with its key,
    generation and writer; followers read it, so it is a *discrepancy* until this agent
    publishes that key again: ``rackplan_plan_discrepancies`` and ``/v1/plans`` show it.  A
    foreign plan's generation is reserved (never planned again), so the agent's next plan of
    the key outranks it for followers.  A late record of a previous leader of our own group
    (the window a lease leaves between confirmation and publish) is logged as such, and is the
    plan of record when followers act on it (:func:`_late_leader`).  Records
    are decoded with the bounded decoder: a poison record is skipped and counted, like at start.
    """
    if tail is None:
        return
    raw, _errors = tail.read_new()
    for r in raw:
        writer = r.header(WRITER_HEADER)
        key = (r.key or b"").decode("utf-8", "replace")[:500]
        refused = unauthenticated(w, r, w.settings.plan_topic, "plan record")
        if refused is not None:
            _forged(w, r, key, refused, writer)
            continue
        g = term.groups.get(key)
        if (
            g is not None
            and r.value is not None
            and g.sent == r.value
            and g.in_doubt is None
            and writer is not None
            and writer.decode("utf-8", "replace") == w.agent_id
        ):
            # Our own plan, byte for byte as published and confirmed: nothing to decode or learn.
            g.sent = None
            own_record_read_back(w, term, key, None)
            continue
        try:
            rec = decode_record(r.key or b"", r.value) if r.key is not None else None
            bad = None if r.key is not None else "bad_key"
        except PlanDecodeError as e:
            rec, bad = None, e.reason
            plan_skipped(w, e.reason)
            w.log.warning("plan record skipped", reason=str(e), partition=r.partition, offset=r.offset)
        if (
            writer is not None
            and writer.decode("utf-8", "replace") == w.agent_id
            and could_be_ours(term, key, rec, bad)
        ):
            own_record_read_back(w, term, key, rec)
            continue
        _foreign(w, term, r, key, rec, bad, None if writer is None else writer.decode("utf-8", "replace"))


def could_be_ours(term: Term, key: str, rec: PlanRecord | None, bad: str | None) -> bool:
    """A record with our writer header that we may have written: never one we could not decode, nor a plan
    above every generation we published or reserved (issue 24: a forger copied the headers and wrote a higher
    generation, which made our later plans stale to every follower).  Such a copy is a foreign writer."""
    if bad is not None:
        return False
    return rec is None or rec.generation < term.book.next_generation(key)


def unauthenticated(w: Wiring, r: RawRecord, topic: str, what: str) -> str | None:
    """Why ``r`` is not the agent's by its MAC (``unsigned`` / ``bad_signature``), or None: valid, or no secret."""
    try:
        check_mac(w.secret, r.topic or topic, r.key, r.value, r.header(MAC_HEADER), what)
    except RecordError as e:
        return e.reason
    return None


def _forged(w: Wiring, r: RawRecord, key: str, reason: str, writer: bytes | None) -> None:
    """A plan-topic record without the agent's MAC: refused here and by every follower holding the secret."""
    plan_skipped(w, reason)
    w.metrics.inc(metric.FOREIGN_WRITERS_TOTAL, {"topic": "plans"})
    w.log.error(
        "foreign writer on the plan topic: a record without the agent's MAC, refused",
        key=key,
        reason=reason,
        tombstone=r.value is None,
        claimed_writer=None if writer is None else writer.decode("utf-8", "replace")[:200],
        partition=r.partition,
        offset=r.offset,
    )


def _foreign(
    w: Wiring, term: Term, r: RawRecord, key: str, rec: PlanRecord | None, bad: str | None, who: str | None
) -> None:
    """A plan-topic record another writer wrote (``who``: its writer header; ``bad``: why it is no plan)."""
    group = (r.header(LEASE_GROUP_HEADER) or b"").decode("utf-8", "replace") or None
    generation: Any = None if rec is None else rec.generation
    if bad is not None:
        generation = f"not a plan ({bad})"
    # Followers act on a tombstone, and on a plan above every generation they saw; they skip the rest.
    followed = bad is None and (
        term.book.latest(key) is not None if rec is None else rec.generation >= term.book.next_generation(key)
    )
    if who is not None and w.lease_group is not None and group == w.lease_group:
        w.log.warning(
            "plan record of another leader of this lease group",
            key=key,
            writer=who,
            generation=generation,
            followed=followed,
        )
        if followed:
            _late_leader(w, term, key, rec)
        elif rec is not None:
            term.book.reserve(key, rec.generation)
        return
    w.metrics.inc(metric.FOREIGN_WRITERS_TOTAL, {"topic": "plans"})
    if rec is not None and term.book.reserve(key, rec.generation):
        w.metrics.inc(metric.GENERATIONS_RESERVED_TOTAL, {"reason": "foreign_plan"})
    if followed:
        g = term.group(key)
        g.reassert, g.reassert_plan = True, rec
        g.discrepancy = {
            "writer": who or "unknown (no rackplan header)",
            "writer_lease_group": group,
            "tombstone": r.value is None,
            "generation": generation,
            "offset": r.offset,
            "timestamp_ms": r.timestamp_ms,
        }
        _discrepancies_metric(w, term)
    w.log.error(
        "foreign writer on the plan topic: a record this agent did not write",
        key=key,
        tombstone=r.value is None,
        generation=generation,
        writer=who or "unknown (no rackplan header)",
        writer_lease_group=group,
        partition=r.partition,
        offset=r.offset,
    )


def _late_leader(w: Wiring, term: Term, key: str, rec: PlanRecord | None) -> None:
    """A deposed leader's late record that followers act on: above every generation this agent saw (it
    landed after the takeover's replay, before this agent published the key).  Ignoring it left followers
    on a plan this agent did not show, and a revoking one without its target (partitions read by nobody):
    it is the plan of record, its handover resumed, and the key planned again against it (tombstoned when
    this agent does not plan it)."""
    if not commit_plan(w, term, key, rec, counted=False):
        return
    g = term.group(key)
    g.retry = True
    g.tombstone_pending = rec is not None and term.reg_synced and key not in term.registered()
    if rec is not None:
        w.metrics.set(metric.PLAN_GENERATION, rec.generation, labels(key))
        g.metrics_pending = True


def own_record_read_back(w: Wiring, term: Term, key: str, rec: PlanRecord | None) -> None:
    """Our own record, read back: it ends a discrepancy, and confirms a plan whose publish timed out."""
    g = term.groups.get(key)
    if g is None:
        return
    if g.discrepancy is not None:
        g.discrepancy = None
        _discrepancies_metric(w, term)
    doubt = g.in_doubt
    if rec is not None and doubt is not None and rec.generation == doubt.generation:
        g.in_doubt = None
        if commit_plan(w, term, key, doubt, counted=False):  # delivered after all: it is what followers hold
            g.retry = True  # planned again against it, in case the cluster moved on meanwhile
            w.log.info("plan whose publish timed out was delivered", key=key, generation=rec.generation)


def watch_lease(w: Wiring, tail: TopicTail | None, leased: bool) -> None:
    """Heartbeats others wrote since the last cycle: a foreign writer stops us (:class:`CannotRun`), a newer
    leader of our group means the lease was lost (:class:`LeaseLost`; ``leased``: we hold one)."""
    if tail is None:
        return
    raw, _errors = tail.read_new()
    now_ms = int(w.clock() * 1000)
    for r in raw:
        refused = unauthenticated(w, r, w.settings.ha.lease_topic, "heartbeat")
        if refused is not None:
            lease_skipped(w, refused)
            w.metrics.inc(metric.FOREIGN_WRITERS_TOTAL, {"topic": "lease"})
            w.log.error(
                "foreign writer on the lease topic: a heartbeat without the agent's MAC, refused",
                reason=refused,
                partition=r.partition,
                offset=r.offset,
            )
            continue
        try:
            hb = dataclasses.replace(decode_heartbeat(r.key, r.value), seen_ms=r.timestamp_ms)
        except HeartbeatError as e:
            lease_skipped(w, e.reason)
            w.log.warning("lease record skipped", reason=str(e), partition=r.partition, offset=r.offset)
            continue
        if hb.agent_id == w.agent_id or hb.released:
            continue
        reason = foreign_writer(hb, w.agent_id, w.lease_group, now_ms)
        if reason is not None:
            w.metrics.inc(metric.FOREIGN_WRITERS_TOTAL, {"topic": "lease"})
            w.log.error("foreign writer on the lease topic; this agent stops publishing", reason=reason)
            raise CannotRun(reason)
        if leased and hb.epoch >= w.epoch:
            raise LeaseLost(f"agent {hb.agent_id!r} leads with epoch {hb.epoch} (ours {w.epoch})")
