"""cooperative-sticky's settling for unequal subscriptions: candidates verified by where the group lands.

The general path is a search, so its follow-up run can end less local than
the target it was handed, or alternate between two targets (issue 10);
iterating it to a fixed point is not guaranteed to end.  Instead, candidates
are *verified*:

* one round's answer (:func:`_choose`) is the search's target, or the
  *keep-first* run's (every partition with its valid owner stays, balancing's
  forced moves aside) when that is lexicographically no worse in (cross-rack
  partitions, moves).  With every partition owned and balanced, the keep-first
  run is the previous assignment: issue 10's keep rule, now for partly owned
  groups too;
* a candidate target of this round is *stable* when its follow-up round,
  computed by this very function on exactly what the members will then own,
  keeps every partition it is handed, and the assignment it lands on stays when
  fed back (a later round with nothing changed).  The real follow-up round runs
  the same deterministic function on the same input, so a stable target
  settles the group in two rounds: a theorem, not a measurement.  Simulations
  nest (a simulated round checks its own follow-up) up to :data:`MAX_DEPTH`,
  :data:`MAX_RUNS` runs and :data:`SETTLE_WORK` flow edges of count-shift
  search (each run has its own budget, so a simulated run is the real one);
  a check a limit cut is "not stable", never
  assumed, since the real round, with more budget, might answer otherwise;
* candidates: the first answer, each candidate's follow-up answer in turn (at
  most :data:`MAX_FOLLOW_UPS`), the keep-first target and searches pricing a
  cross-rack partition at :data:`CROSS_PRICES` moves when they land less
  locally or with more moves than the first answer promised, and the search
  started from what it finds with nothing owned (up to :data:`FRESH_LIMIT`
  partitions; not when a stable candidate already lands on a proven floor,
  :meth:`_Round.least_reached`), and the *exact candidate* (:mod:`.general_exact`: the optimum
  over every balanced assignment, for small models), which is also the only
  thing that can overrule a first answer that withholds nothing and stays.  The
  stable one landing with the fewest cross-rack partitions, then the fewest
  moves, is returned.  None stable: the first answer, ``fixed_point`` False,
  and :func:`.plan.assign` logs its warning.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable

from ...flow.memo import FlowMemo
from ...record import field, record, replace
from .common import Prepared, cross_count
from .general import assign_general_proven, keep_first_floor
from .general_exact import exact_candidate, least_known
from .general_flow import SHIFT_WORK, Budget
from .settling import CONTESTED, MAX_FOLLOW_UPS, Settlement, holders, kept

#: Nested follow-up simulations of :func:`settle_general` (a simulated round simulating its own follow-up).
MAX_DEPTH = 3
#: Prices of a cross-rack partition, in moves, of the priced searches :func:`settle_general` may add.
CROSS_PRICES = (2, 3, 5, 8)
#: Groups up to this many partitions also get :func:`settle_general`'s fresh-start candidate (two runs more).
FRESH_LIMIT = 5_000
#: Runs of the general path one :func:`settle_general` call may spend, its simulations included.
MAX_RUNS = 48
#: Flow edges the count-shift searches of one :func:`settle_general` call may build, its simulations
#: included: a run still starts while any is left (each run is itself bounded by its own budget), so
#: the whole settling costs at most this plus one run's budget, whatever the group's shape (issue 29).
SETTLE_WORK = 10 * SHIFT_WORK


def _moved(holder: list[int], claim: list[int]) -> int:
    """Claimed partitions ``holder`` takes from their claimant: this round's moves (contested ones included)."""
    return sum(1 for h, c in zip(holder, claim, strict=True) if c != -1 and h != c)


@record()
class _Work:
    """What one :func:`settle_general` call may still spend, and whether a limit cut its search."""

    runs: int
    edges: int = SETTLE_WORK
    cut: bool = False
    proven: list[int] | None = None  # the last search's holder, if its cross-rack count is proven minimal
    memo: FlowMemo = field(default_factory=FlowMemo)  # every run's flows, solved once each
    #: a round's answer (and its keep-first target) by owners: a pure function of them
    answers: dict[tuple[int, ...], tuple[list[int], list[int] | None]] = field(default_factory=dict)
    #: the exact candidates' proven least cross-rack counts, by component (see exact_candidate)
    least_cross: dict[Hashable, int] = field(default_factory=dict)


def settle_general(prep: Prepared, contested: Collection[int] = ()) -> Settlement:
    """The unequal-subscription path's target, chosen by where the group *lands* (see the module docstring)."""
    work = _Work(MAX_RUNS)
    holder, fixed = _settle_general(prep, contested, work, 0)
    return Settlement(holder, fixed, MAX_RUNS - work.runs, SETTLE_WORK - work.edges)


#: A stable candidate: (cross-rack partitions where the group lands, this round's moves, -order tried,
#: the target, where the group lands); the least is chosen.
Candidate = tuple[int, int, int, list[int], list[int]]


def _settle_general(
    prep: Prepared, contested: Collection[int], work: _Work, depth: int
) -> tuple[list[int], bool]:
    """:func:`settle_general` at simulation depth ``depth``: the target, and whether it is proven stable.

    A target that withholds nothing is final.  Otherwise its follow-up round is computed by this very
    function on what the members will own (the real round runs it too, with more budget: when no
    limit cut the simulation, both take the same path), and the target is *stable* when that answer
    keeps every partition it was handed; the group then lands on the answer, with this round's moves.

    The phases: the round's first answer; if it is already final, only the exact candidate may
    overrule it; else candidates in turn (the first answer and its follow-ups, the keep-first run and
    the priced searches while the promise is not kept, the fresh start, the exact candidate), the
    stable one landing best chosen.
    """
    r = _Round(prep, contested, work, depth)
    first, keep_first = r.answer_to(prep.owner)
    if keep_first is None:
        keep_first = kept(prep)  # every partition owned and balanced: the keep-first run is the owners
    if r.follow(first) == first and (r.affordable_answer(first) or (None,))[0] == first:
        # Withholds nothing, and fed back it stays: final, unless an assignment over other counts
        # (which the search may never visit from these owners) is strictly better.
        better = r.exact(first)
        if better is None:
            return first, True
        r.tried.append(first)
        r.stable.append((cross_count(prep, first), _moved(first, r.claim), -1, first, first))
        r.explore(better)
        return min(r.stable)[3], True
    r.explore(first)
    r.keep_the_promise(first, keep_first)
    r.fresh_start()
    # The optimum over every balanced assignment (all count vectors), started from the best landing.
    r.explore(r.exact(min(r.stable)[4] if r.stable else first))
    if not r.stable:
        return first, False
    return min(r.stable)[3], True


class _Round:
    """One settling round at a simulation depth: its claims, the shared work, the candidates tried and
    those found stable (the state the phases of :func:`_settle_general` share)."""

    def __init__(self, prep: Prepared, contested: Collection[int], work: _Work, depth: int) -> None:
        self.prep, self.work, self.depth = prep, work, depth
        self.claim = list(prep.claim_owner)
        for gp in contested:
            self.claim[gp] = CONTESTED
        self.stable: list[Candidate] = []
        self.tried: list[list[int]] = []

    def follow(self, holder: list[int]) -> list[int]:
        """What the follow-up round is handed: the target minus what this round withholds."""
        claim = self.claim
        return [h if claim[gp] == -1 or claim[gp] == h else -1 for gp, h in enumerate(holder)]

    def run(
        self, owner: list[int], keep_owned: bool = False, price: int = 0, start: list[int] | None = None
    ) -> tuple[list[int], list[int] | None]:
        """One round of the general path (:func:`_choose`) on these owners, charged to the work."""
        work = self.work
        work.runs -= 1
        step = replace(
            self.prep,
            owner=owner,
            keep_owned=keep_owned,
            cross_price=price,
            start=start,
            min_cross_holder=work.proven,
        )
        found, keep, work.proven, spent = _choose(step, work.memo)
        work.edges -= spent
        return found, keep

    def afford(self) -> bool:
        """Whether a run is still in budget; a refusal marks the search cut (see :func:`_settle_general`)."""
        if self.work.runs > 0 and self.work.edges > 0:
            return True
        self.work.cut = True
        return False

    def answer_to(self, owner: list[int]) -> tuple[list[int], list[int] | None]:
        """:func:`_choose` on these owners (memoised: it depends on nothing else)."""
        key = tuple(owner)
        got = self.work.answers.get(key)
        if got is None:
            got = self.work.answers[key] = self.run(owner=owner)
        return got

    def affordable_answer(self, owner: list[int]) -> tuple[list[int], list[int] | None] | None:
        """:meth:`answer_to` when memoised or affordable, else None (the search is cut): every run but a
        round's own first answer is asked for through :meth:`afford`, so the settling never starts a run
        with its edges spent and costs at most ``SETTLE_WORK`` plus one run's two budgets."""
        if tuple(owner) not in self.work.answers and not self.afford():
            return None
        return self.answer_to(owner)

    def spend(self) -> bool:
        """One run of the budget for the exact candidate's solver, if affordable."""
        if not self.afford():
            return False
        self.work.runs -= 1
        return True

    def exact(self, base: list[int]) -> list[int] | None:
        """The exact candidate from the balanced ``base`` (:mod:`.general_exact`), if it is better."""
        return (
            None
            if self.prep.num_partitions > FRESH_LIMIT
            else exact_candidate(self.prep, base, self.spend, self.work.least_cross)
        )

    def simulate(self, owner: list[int]) -> list[int] | None:
        """The next round's target on members owning (and claiming) ``owner``, one depth down; None when
        a limit refused or cut it (the real round, with more budget, may answer differently)."""
        work = self.work
        if self.depth >= MAX_DEPTH:
            work.cut = True
            return None
        if not self.afford():
            return None
        outer, work.cut = work.cut, False
        nxt = replace(self.prep, owner=owner, claim_owner=owner, min_cross_holder=None)
        landed, _ = _settle_general(nxt, (), work, self.depth + 1)
        inner, work.cut = work.cut, outer or work.cut
        return None if inner else landed

    def verdict(self, target: list[int]) -> tuple[list[int] | None, list[int] | None]:
        """(where the group lands if stable, else None; the follow-up's answer, None if a limit cut it)."""
        handed = self.follow(target)
        landed: list[int] | None = target
        if handed != target:
            landed = self.simulate(handed)
            if landed is None:
                return None, None
            if any(o >= 0 and landed[gp] != o for gp, o in enumerate(handed)):
                return None, landed  # the follow-up round withholds again
        assert landed is not None
        # Fed back (a later round, nothing changed) it must stay.  That round is this function on owners
        # and claims ``landed``: this very call when that is our input (it returns ``landed`` if chosen);
        # else it returns ``landed`` at once when the round's answer is ``landed``; else computed.
        if landed == self.prep.owner == self.claim:
            return landed, landed
        answer = self.affordable_answer(landed)
        if answer is None:
            return None, None
        if answer[0] == landed:
            return landed, landed
        again = self.simulate(landed)
        if again is None:
            return None, None
        return (landed, landed) if again == landed else (None, again)

    def explore(self, target: list[int] | None) -> None:
        """A candidate target, then what the group would be handed next, until one repeats or none is left."""
        for _ in range(MAX_FOLLOW_UPS):
            if target is None or target in self.tried:
                return
            self.tried.append(target)
            landed, answer = self.verdict(target)
            if landed is not None:
                moved = _moved(target, self.claim)
                self.stable.append((cross_count(self.prep, landed), moved, -len(self.tried), target, landed))
            # What the group would be handed next, tried as this round's target: after a stable target,
            # its landing (it may give a withheld partition back to its claimant: one move fewer).
            target = answer

    def keep_the_promise(self, first: list[int], keep_first: list[int] | None) -> None:
        """While no stable candidate lands as locally and with as few moves as ``first`` promised: the
        keep-first target, then searches pricing a cross-rack partition at a few moves."""
        prep = self.prep
        promised = (cross_count(prep, first), _moved(first, self.claim))
        if not self.stable or min(self.stable)[:2] > promised:
            if keep_first is None and self.afford():
                keep_first = self.run(prep.owner, keep_owned=True)[0]
            self.explore(keep_first)
        for price in CROSS_PRICES:
            # Still landing less locally or with more moves than promised: the promise was a target the
            # follow-up round cannot keep.  Searches that price a cross-rack partition at a few moves
            # propose targets that trade less locality for fewer moves (Kafka's revocations do).
            if (self.stable and min(self.stable)[:2] <= promised) or not self.afford():
                break
            self.explore(self.run(prep.owner, price=price)[0])

    def least_reached(self) -> bool:
        """Whether the best stable candidate lands on a floor no assignment goes below: the partitions
        no subscriber is local to (:func:`unavoidable_cross`), or the least cross-rack count an exact
        candidate of this settling proved for the component.  Then a candidate kept only when strictly
        more local (the fresh start) is not run: the plan is the one it would have been."""
        if not self.stable:
            return False
        best = min(self.stable)
        if best[0] <= unavoidable_cross(self.prep):
            return True
        least = least_known(self.prep, best[4], self.work.least_cross)
        return least is not None and best[0] <= least

    def fresh_start(self) -> None:
        """The search from nothing owned, when it reaches more local counts, restarted from there with the
        owners pricing the moves (small groups only)."""
        prep = self.prep
        if prep.num_partitions > FRESH_LIMIT or self.least_reached() or not self.afford():
            return
        # The search keeps what is owned first, so the counts it reaches depend on the owners; from
        # nothing owned it can reach more local counts.  If so, the same search from that holder,
        # owners pricing the moves (at those counts the flow is exact), is one more candidate.
        fresh = self.run([-1] * prep.num_partitions)[0]
        best = min(self.stable)[0] if self.stable else prep.num_partitions + 1
        if cross_count(prep, fresh) < best and self.afford():
            self.explore(self.run(prep.owner, start=fresh)[0])


def unavoidable_cross(prep: Prepared) -> int:
    """Partitions of a topic none of whose subscribers is local to them: cross-rack in every assignment.

    A floor no candidate can go below (see :meth:`_Round.least_reached`)."""
    local = prep.topic_local_bits()
    ptopic = prep.part_topic
    return sum(1 for gp, k in enumerate(prep.part_mask) if k and not k & local[ptopic[gp]])


def _choose(
    prep: Prepared, memo: FlowMemo | None = None
) -> tuple[list[int], list[int] | None, list[int] | None, int]:
    """One round of the general path: its target, the keep-first target if computed, the search's proof,
    and the flow edges its count-shift searches built (``memo``: flows solved before, shared by the runs).

    The search (:func:`assign_general_proven`) may move owned partitions to end more local.  When it
    moves any, the keep-first run (``Prepared.keep_owned``: balancing's forced moves only) is computed
    too and returned instead when it is lexicographically no worse in (cross-rack partitions, moves):
    so a round never moves a partition for nothing it could see.  With every partition owned and the
    owners balanced, the keep-first run is the previous assignment itself (issue 10's keep rule).
    """
    n_parts = prep.num_partitions
    memo = FlowMemo() if memo is None else memo
    budget = Budget(memo=memo)
    per_member, proven = assign_general_proven(prep, budget)
    found = holders(per_member, n_parts)
    moves = _moved(found, prep.owner)
    if not moves or prep.keep_owned:
        return found, None, proven, SHIFT_WORK - budget.edges
    keep_prep = replace(prep, keep_owned=True, min_cross_holder=None, start=None)
    if keep_first_floor(keep_prep) > cross_count(prep, found):
        return found, None, proven, SHIFT_WORK - budget.edges  # the keep-first run cannot be as local
    keep_budget = Budget(memo=memo)
    keep = holders(assign_general_proven(keep_prep, keep_budget)[0], n_parts)
    spent = 2 * SHIFT_WORK - budget.edges - keep_budget.edges
    if (cross_count(prep, keep), _moved(keep, prep.owner)) <= (cross_count(prep, found), moves):
        return keep, keep, proven, spent
    return found, keep, proven, spent
