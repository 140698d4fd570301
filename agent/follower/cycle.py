"""What each :meth:`PlanFollower.poll <rackplan.agent.follower.PlanFollower.poll>` runs before it hands
out a message: the follower's state machine.

A member is WAITING (no plan partitions to read), following a PLAN, or in
group SUBSCRIPTION (the fallback).  Each round reads the control topics, then
decides, from the values :mod:`.handover` and :mod:`.fallback`
compute: fence itself while its registration is unconfirmed, give up a
tombstoned group's partitions, start, cancel or finish a fallback, apply a
newer plan (give up first, committed; take second, fenced), or leave the
group when the agent is back.  The I/O is the pieces' (:class:`Partitions`,
:class:`Registrar`, :class:`ControlIntake`); this class only decides and keeps
where the member stands.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Mapping, Sequence

from ..core.ports import Clock, Logger, Monotonic, TopicPart
from ..kafka.errors import commit_fenced
from ..protocol.plans import PlanRecord
from ..protocol.registrations import FollowerStatus
from .fallback import fallback_due, registration_stale, should_rejoin
from .handover import PLAN, SUBSCRIPTION, WAITING, handover, missing, retry_take_after
from .intake import ControlIntake
from .partitions import Partitions
from .registration import Registrar
from .settings import PlanFollowerSettings

TP = TopicPart


class FollowerCycle:
    """Where a follower stands (mode, generation, timers) and the steps that move it."""

    def __init__(
        self,
        member_id: str,
        topics: Sequence[str],
        settings: PlanFollowerSettings,
        parts: Partitions,
        registrar: Registrar,
        intake: ControlIntake,
        clock: Monotonic,
        wall: Clock,
        log: Logger,
        stats: collections.Counter[str],
    ) -> None:
        self.member_id, self.topics, self.settings = member_id, tuple(topics), settings
        self._parts, self._registrar, self._intake = parts, registrar, intake
        self._clock, self._wall, self.log, self.stats = clock, wall, log, stats
        #: WAITING, PLAN or SUBSCRIPTION; and the generation of the plan applied last
        self.mode = WAITING
        self.generation = 0
        #: since when this member has had no plan partitions to read (None: it reads them)
        self._waiting_since: float | None = clock()
        #: when the grace before group subscription ends (None: no fallback under way)
        self._fallback_at: float | None = None
        #: the newest generation seen when falling back: only a newer plan brings the member back
        self._fallback_generation = 0
        #: a take the group refused is tried again from then on
        self._add_retry_at = 0.0
        #: the registration went unconfirmed too long; and when following may resume (once confirmed)
        self.fenced_self = False
        self._unfence_at: float | None = None
        #: close() is under way (a refused commit then only releases); closed or aborted: nothing runs
        self.closing = False
        self.closed = False
        parts.stop_by = self._stop_by

    def _stop_by(self) -> float:
        """When (monotonic) a wait must end: the registration's fence, 2/3 of its TTL unconfirmed.

        Nothing can fence the member while it waits, so no wait (a commit, a
        committed-offset lookup) may outlast the fence: the agent expires the
        member at the whole TTL and gives its partitions away.  The fence's own
        release may wait to 5/6 of the TTL for its commit, so that the next
        owner starts where this one stopped.  In group subscription Kafka
        fences the member: no bound.
        """
        if self.mode == SUBSCRIPTION:
            return math.inf
        share = 5 / 6 if self.fenced_self else 2 / 3
        unconfirmed_s = self._wall() - self._registrar.answered_ms() / 1000
        return self._clock() + share * self.settings.registration_ttl_s - unconfirmed_s

    def service(self) -> None:
        """Everything but reading messages: control records, registration, plan, fences, fallback."""
        if self.closed:
            return
        self._registrar.poll()
        self._intake.read_new()
        now = self._clock()
        if self.mode == SUBSCRIPTION:
            if self._should_rejoin():
                self._rejoin()
        else:
            self._follow(now)
        if self.mode != WAITING and now - self._parts.last_commit >= self.settings.commit_interval_s:
            self.commit_positions(list(self._parts.owned), probe=self.mode == PLAN)
        self.register()
        if self.mode != SUBSCRIPTION:
            # A take (its fenced commit) or a commit takes time: the 2/3 of the TTL may have passed since the
            # check above, and no message may be handed out past it (found by the state-machine property test).
            self._self_fence(unfence=False)

    def _follow(self, now: float) -> None:
        """Out of group subscription: the self-fence, a tombstone, the fallback's timers, then the plan."""
        self._self_fence()
        if self._intake.tombstoned:
            self._drop_tombstoned()
        self._fallback_timers(now)
        latest = self._intake.latest
        if (
            self.mode != SUBSCRIPTION
            and self._fallback_at is None
            and not self.fenced_self
            and latest is not None
            and (latest.generation > self.generation or self._pending_add())
        ):
            self._apply(latest, self._intake.latest_assignment)

    def _drop_tombstoned(self) -> None:
        """The agent no longer plans the group: give everything up (committed) and wait for a plan."""
        self._intake.tombstoned = False
        self.release(list(self._parts.owned), commit=True)
        if self.mode != SUBSCRIPTION:
            self.mode = WAITING
            self._waiting_since = self._waiting_since or self._clock()
            self.register(force=True)

    def _fallback_timers(self, now: float) -> None:
        """Start a fallback when due; during its grace, cancel it (no longer due) or finish it (grace over)."""
        due = self._fallback_due()
        if self._fallback_at is not None:
            if not due:
                self.log.info("fallback cancelled: the agent is alive and a plan includes this member")
                self._fallback_at = None
            elif now >= self._fallback_at:
                self._subscribe()
        elif due:
            self._begin_fallback(grace=True)

    def status(self) -> FollowerStatus:
        """What the registration tells the agent: the generation applied (released) and the mode."""
        return FollowerStatus(released_generation=self.generation, mode=self.mode)

    def register(self, force: bool = False) -> None:
        """Publish the registration if it changed or is due (``force``: now)."""
        self._registrar.register(self.status(), force)

    def _agent_gone(self) -> bool:
        return self._intake.agent_gone(self.settings.agent_timeout_s)

    # ---- following the plan ---------------------------------------------------------------

    def _pending_add(self) -> bool:
        """Partitions the applied plan gives us that could not be taken yet (the group was not free)."""
        latest = self._intake.latest
        if latest is None or latest.generation != self.generation:
            return False
        if self._clock() < self._add_retry_at:
            return False
        return missing(self._intake.latest_assignment, self.member_id, self._parts.owned)

    def _apply(self, rec: PlanRecord, assignment: Mapping[str, list[TP]]) -> None:
        """Give up what the plan no longer gives us (committed first), take what it gives us, confirm."""
        step = handover(self._parts.owned, assignment, self.member_id)
        if step.revoke and not self.release(step.revoke, commit=True):
            return  # fenced: fallen back to group subscription
        first = rec.generation != self.generation
        # A timed-out handover, or a holder that left: never take what it may still read (see .releases).
        # Judging a silent holder may read the control topics to their end (a third of the TTL at most):
        # refresh the registration first if due, as the unfencing read does, so no read starves it.
        self.register()
        waiting = self._intake.withheld(rec, within_s=self._parts.wait_s())
        held = {tp for parts in waiting.values() for tp in parts}
        add = [tp for tp in step.add if tp not in held]
        took = not add or self._parts.take(add)
        if not took or len(add) < len(step.add):
            self._add_retry_at = retry_take_after(self._clock(), self.settings.commit_interval_s)
        if len(add) < len(step.add) and first:
            self.stats["takes_withheld"] += 1
            self.log.warning(
                "partitions not taken yet: their previous holder has not released them",
                generation=rec.generation,
                holders=sorted(m for m, parts in waiting.items() if set(parts) & set(step.add)),
                partitions=len(step.add) - len(add),
            )
        self.generation = rec.generation
        self.mode = step.mode
        if self.mode == PLAN and took:
            self._waiting_since = None
        elif (
            self._waiting_since is None
        ):  # not in the plan, or its partitions not free: the plan timeout runs
            self._waiting_since = self._clock()
        if first:
            self.stats["plans_applied"] += 1
            self.log.info(
                "plan applied",
                generation=rec.generation,
                state=rec.state,
                assigned=len(self._parts.owned),
                released=len(step.revoke),
            )
        self.register(force=first)  # a retried take changes nothing to say, unless the mode changed

    def release(self, parts: list[TP], commit: bool) -> bool:
        """Commit (when asked) and stop reading ``parts``; False when the commit says we are fenced."""
        if not parts:
            return True
        if commit:
            following_group = self.mode == SUBSCRIPTION
            err = self.commit_positions(parts)
            if commit_fenced(err):
                if following_group:  # commit_positions fences only a follower of plans
                    self._fence(err)
                return False  # fenced once, by commit_positions or just above
            if err:
                self.stats["release_commit_failed"] += 1
                self.log.warning(
                    "offsets not committed before giving partitions up; the next owner re-reads them",
                    error=err,
                    partitions=len(parts),
                )
        self._parts.unassign(parts)
        return True

    def commit_positions(self, parts: list[TP], probe: bool = False) -> str:
        """Commit what was read of ``parts`` (``probe``: even without news); a refused plain commit fences."""
        err = self._parts.commit_positions(parts, probe)
        if commit_fenced(err) and self.mode != SUBSCRIPTION:
            self._fence(err)
        elif err:
            self.stats["commits_failed"] += 1
        return err

    def _fence(self, err: str) -> None:
        """A plain commit was refused: someone in the group uses group subscription. Follow it at once."""
        self.stats["fenced"] += 1
        if self.closing:
            self.release(list(self._parts.owned), commit=False)
            return
        self.log.warning(
            "commit refused: the group has members using group subscription; falling back to it",
            error=err,
        )
        self.release(list(self._parts.owned), commit=False)
        self._begin_fallback(grace=False)

    def _self_fence(self, unfence: bool = True) -> None:
        """Stop reading while the registration is not confirmed: the agent may be about to expire us.

        ``unfence``: also resume once it is confirmed again (which may read the plan topic to its end)."""
        now_ms = int(self._wall() * 1000)
        stale = registration_stale(now_ms, self._registrar.answered_ms(), self.settings.registration_ttl_s)
        if stale:
            self._unfence_at = None
        if stale and not self.fenced_self:
            self.fenced_self = True
            self.stats["self_fenced"] += 1
            self.log.warning(
                "registration not confirmed for 2/3 of its TTL; giving up partitions until it is",
                partitions=len(self._parts.owned),
            )
            self.release(list(self._parts.owned), commit=True)
        elif not stale and self.fenced_self and unfence:
            self._unfence()

    def _unfence(self) -> None:
        """Confirmed again: follow the plan once the agent cannot still be expiring us, and the plan is current."""
        # The agent may have decided to expire us just before our refreshed registration landed; such a
        # plan is published within one of its cycles.  Wait two of its intervals after confirmation.
        now = self._clock()
        if self._unfence_at is None:
            hb = self._intake.heartbeat
            interval = hb.interval_s if hb is not None else self.settings.io_timeout_s
            self._unfence_at = now + 2 * interval
        if now < self._unfence_at:
            return
        # While fenced the agent may have expired this member and given its partitions to others in a
        # newer plan this member has not read yet (its tail lags through the same outage): re-taking the
        # cached plan would own them twice.  Read the plan topic to its end first; stay fenced if not.
        # That read blocks this thread, which also refreshes the registration: bounded by a third of the
        # TTL (the refresh interval) so that the agent never expires a member for reading (found on real
        # Kafka with a 4 s TTL and a 5 s io_timeout_s: each unfencing read that did not finish starved the
        # refresh, the agent expired the member, tombstoned the plan, and it began again).  A read cut
        # short keeps what it read and goes on at the next call.
        self.register()
        if not self._intake.read_to_end(
            min(self.settings.io_timeout_s, self.settings.registration_ttl_s / 3)
        ):
            return
        self.fenced_self = False
        self._unfence_at = None
        self.log.info("registration confirmed again; following the plan")
        # The plan is applied by the caller, :meth:`_follow`, after the fallback's timers: never during a
        # fallback's grace (found in CI: the coordinator stopped, every follower fenced itself, the agent's
        # heartbeat stopped; one follower, confirmed again within the grace, re-took its cached plan while
        # the others were about to subscribe, and the grace's end subscribed it with those partitions).

    # ---- group subscription (fallback) ------------------------------------------------

    def _fallback_due(self) -> bool:
        """The agent is gone, or this member has waited too long for a plan it can follow."""
        latest = self._intake.latest
        return fallback_due(
            agent_gone=self._agent_gone(),
            waiting_for_s=None if self._waiting_since is None else self._clock() - self._waiting_since,
            plan_timeout_s=self.settings.plan_timeout_s,
            latest_generation=None if latest is None else latest.generation,
            applied_generation=self.generation,
            fallback_generation=self._fallback_generation,
            named=self.member_id in self._intake.latest_assignment,
        )

    def _begin_fallback(self, grace: bool) -> None:
        s = self.settings
        reason = "the agent's heartbeat stopped" if self._agent_gone() else "no plan for this member arrived"
        if grace:
            self.release(list(self._parts.owned), commit=True)
            if self.mode == SUBSCRIPTION:  # the commit was refused: already following the group
                return
        self._fallback_at = self._clock() + (s.fallback_grace_s if grace else 0.0)
        self._fallback_generation = self._intake.seen_generation
        self.mode = WAITING
        self.log.warning(
            "falling back to group subscription",
            reason=reason if grace else "a plain commit was refused",
            timeout_s=s.agent_timeout_s if self._agent_gone() else s.plan_timeout_s,
            grace_s=s.fallback_grace_s if grace else 0.0,
        )
        if not grace:
            self._subscribe()

    def _subscribe(self) -> None:
        self._fallback_at = None
        self._parts.subscribe(self.topics)
        self.mode = SUBSCRIPTION
        self.stats["fallbacks"] += 1
        self.register(force=True)

    def _should_rejoin(self) -> bool:
        """The agent is back and published a plan newer than the one we fell back from."""
        latest = self._intake.latest
        return should_rejoin(
            agent_alive=self._intake.agent_alive(self.settings.agent_timeout_s),
            latest_generation=None if latest is None else latest.generation,
            fallback_generation=self._fallback_generation,
            named=self.member_id in self._intake.latest_assignment,
        )

    def _rejoin(self) -> None:
        """Leave the group (committing in the revoke callback), then follow the plan again.

        Through :meth:`_follow`, like every other apply: a member that fenced
        itself before it fell back (its registration unconfirmed) takes nothing
        until it is confirmed again, and then it is gated by the same checks as
        any other plan (the property test found a rejoin that took its plan
        while still fenced, and then ignored a newer plan revoking it).
        """
        self.log.info("the agent is back: leaving group subscription to follow the plan")
        self._parts.leave_group()
        self.mode = WAITING
        self._waiting_since = self._clock()
        self.stats["rejoins"] += 1
        self._follow(self._clock())
