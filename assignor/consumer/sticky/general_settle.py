"""cooperative-sticky: Kafka's CooperativeStickyAssignor (KIP-54, KIP-429) with better rack locality (KIP-881).

Priorities, as in Kafka: balance first, then stickiness, then rack locality,
except that an owned partition in the wrong rack is moved when, and only when,
that lowers the number of cross-rack partitions.  Kafka instead revokes *every*
owned partition whose rack does not match and deals them again, which moves
many partitions for nothing when some must stay cross-rack anyway (one member
of 2,100 leaving a 60/30/10 group with one replica per partition: Kafka moves
~560, we move at most one; both end with the same cross-rack count).

Input and output.  Previous owners follow :mod:`rackplan.assignor.consumer.owned` (older
generations dropped, a partition claimed twice in the newest generation is
unowned); an owned partition can only be kept if its owner still subscribes to
the topic.  Cross-rack is the contract's notion (a partition with no known
replica rack is never cross-rack), whether or not Kafka would switch its rack
logic on.  We compute the whole target, then every partition changing owner is
withheld and listed under ``revoked`` (:func:`rackplan.assignor.consumer.owned.withhold_moving`).
Members are numbered in sorted-id order, partitions in (topic, partition)
order, and ties go to the lowest number: the output is deterministic.

Equal subscriptions (:mod:`rackplan.assignor.consumer.sticky.constrained`).  Every member gets
``q = P // N`` or ``q + 1`` partitions, ``P % N`` of them ``q + 1``.  Write
``L(m)`` for the owned partitions that *match* ``m``'s rack as Kafka's
``racksMismatch`` sees it (``m`` has no rack, or a replica is in its rack),
and ``R`` for the balanced assignments in which every member keeps at least
``min(|L(m)|, cap(m))`` of ``L(m)``, ``cap(m)`` being its final count.  One
exact min-cost flow returns the member of ``R`` with the fewest cross-rack
partitions and, among those, the fewest moves: cost ``BIG * cross + moves``.

* Kafka's result lies in ``R``, whatever order it visits members in: its
  first step keeps, of each member's matching owned partitions, all of them
  below ``minQuota``, ``maxQuota`` of them while ``maxQuota`` slots remain,
  ``minQuota`` otherwise; later steps only add partitions, and the result is
  balanced (Kafka 3.5.1+, after KAFKA-15170).  It keeps nothing else owned
  that ``R`` would forbid, since ``R`` forbids nothing but releasing matching
  partitions.
* Hence, on the same previous owners, our target is *lexicographically no
  worse* than Kafka's (fewer cross-rack partitions; or as many and no more
  moves): the flow's optimum over ``R`` is, and the settling below changes
  the target only with no more moves at equal cross-rack, or with strictly
  fewer cross-rack partitions.  So we never have more cross-rack partitions
  than Kafka's target, and never move more unless we end with strictly fewer
  cross-rack partitions (measured against a model of Kafka: in 2.4% of small
  random cases, mostly one extra move per cross-rack partition saved).

Unequal subscriptions (:mod:`rackplan.assignor.consumer.sticky.general`).  Kafka's balance rule
is then a local condition; there is no exact flow over all balanced
assignments.  We keep owned partitions, deal the rest to least-loaded
subscribers, restore balance with free partitions before owned ones, then
place every partition optimally at the counts reached with an exact flow (an
owned partition moves only if that lowers the final cross-rack count), and
search over counts with the same flow (*count shifts*, the moves by which
Kafka's balancing sometimes ends more local).  Unlike Kafka's general path,
which hands a balancing move to the least-loaded member whatever its rack,
receivers and partitions are chosen to stay rack-aligned.  This is a local
search, not a proof (small groups also get the exact optimum as a candidate in
:func:`settle_general`): "never worse than Kafka" is measured against Kafka's own
assignor (``tests/assignor/test_vs_kafka_java.py``, docs/assignors.md).

Settling, equal subscriptions (:func:`settle`).  The follow-up round sees
members owning this round's target minus the withheld partitions, and itself
checks the case where everything it assigns is owned.  ``R`` does not shrink
monotonically with ownership (a member owning more may drop to ``q`` and
release an older partition), so a one-shot optimum could be improved in the
follow-up round, which would then withhold again.  We therefore run both
rounds here, taking their answer as the new target, until the target is a
fixed point of both: the real follow-up then reproduces it and withholds
nothing, and feeding the converged plan back changes nothing.  Each change
either keeps the cross-rack count and re-places only withheld partitions, or
lowers the cross-rack count (the target is the re-run's only zero-move
solution), so this ends.  The simulations are capped at
:data:`MAX_FOLLOW_UPS`; a target still changing then is returned with
``Settlement.fixed_point`` False and :func:`assign` logs a warning naming the
group (the plan stays valid; its real follow-up may move partitions again).
Every partition must have a holder when settling ends: if not, the write-back
is broken and :class:`~rackplan.assignor.flow.PostconditionError` says which.
Keep rule: when every partition is validly owned by a subscriber and that
previous assignment is balanced, it is returned unless the settled target is
strictly more local.

Settling, unequal subscriptions (:func:`settle_general`).  The general path is
a search, so its follow-up run can end less local than the target it was
handed, or alternate between two targets (issue 10); iterating it to a fixed
point is not guaranteed to end.  Instead, candidates are *verified*:

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
  partitions), and the *exact candidate* (:mod:`.general_exact`: the optimum
  over every balanced assignment, for small models), which is also the only
  thing that can overrule a first answer that withholds nothing and stays.  The
  stable one landing with the fewest cross-rack partitions, then the fewest
  moves, is returned.  None stable: the first answer, ``fixed_point`` False,
  and :func:`assign` logs its warning.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection

from ...flow import PostconditionError
from ...model import Cluster, ConsumerGroup, ConsumerPlan, TopicPartition
from ..owned import contested_partitions, withhold_moving
from .common import Prepared, prepare
from .constrained import assign_constrained
from .general import assign_general_proven, keep_first_floor
from .general_exact import exact_candidate
from .general_flow import SHIFT_WORK, Budget

#: Bound on follow-up simulations; each one that changes the target lowers its cost (see module docstring).
MAX_FOLLOW_UPS = 16

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

#: Claim marker of a contested partition in :func:`settle`: no member number equals it.
CONTESTED = -2


def _holders(per_member: list[list[int]], n_parts: int) -> list[int]:
    holder = [-1] * n_parts
    for i, parts in enumerate(per_member):
        for gp in parts:
            holder[gp] = i
    return holder


#: An assignment algorithm: partitions per member, and the holder when its cross-rack count is proven minimal.
Algorithm = Callable[[Prepared], tuple[list[list[int]], list[int] | None]]


def _unproven(prep: Prepared) -> tuple[list[list[int]], list[int] | None]:
    return assign_constrained(prep), None


@dataclasses.dataclass(frozen=True, slots=True)
class Settlement:
    """What :func:`settle` reached: the holder of each partition, and whether it is a fixed point.

    ``fixed_point`` is False only when :data:`MAX_FOLLOW_UPS` simulations
    kept changing the target (:func:`settle`; never seen), or when no candidate
    was found stable (:func:`settle_general`, whose ``follow_ups`` counts the
    runs it spent): the plan is still valid and balanced, but the real
    follow-up round may move partitions again.  :func:`assign` logs a warning then.
    """

    holder: list[int]
    fixed_point: bool
    follow_ups: int
    #: flow edges the count-shift searches built (:func:`settle_general`; 0 where not counted)
    shift_edges: int = 0


def cross_count(prep: Prepared, holder: list[int]) -> int:
    """Cross-rack partitions of ``holder`` (the contract's notion, see :meth:`Prepared.cross`)."""
    cls, masks = prep.member_class, prep.part_mask
    return sum(prep.cross(cls[h], masks[gp]) for gp, h in enumerate(holder))


def balanced(prep: Prepared, holder: list[int]) -> bool:
    """The contract's balance rule: no holder of a topic two or more above one of the topic's subscribers."""
    cnt = [0] * len(prep.member_ids)
    for h in holder:
        cnt[h] += 1
    top = [-1] * len(prep.topics)
    for gp, h in enumerate(holder):
        t = prep.part_topic[gp]
        top[t] = max(top[t], cnt[h])
    return all(top[t] <= min(cnt[i] for i in subs) + 1 for t, subs in enumerate(prep.topic_members) if subs)


def kept(prep: Prepared) -> list[int] | None:
    """The previous assignment as a target, when keeping it is a valid plan: every partition validly
    owned by a subscriber (none contested) and the result balanced; else None.

    Such a target moves nothing and withholds nothing, so it is a fixed point by itself: its
    follow-up round sees the same owners and :func:`settle` keeps it again.
    """
    owner = prep.owner
    if -1 in owner or not balanced(prep, owner):
        return None
    return list(owner)


def settle(prep: Prepared, algorithm: Algorithm, contested: Collection[int] = ()) -> Settlement:
    """The target holder of each partition, a fixed point of the follow-up round.

    The follow-up round sees every member owning its target minus what this
    round withholds, the withheld partitions owned by nobody.  Running that
    round here and taking its answer as the new target until it changes
    nothing makes the real follow-up move nothing (see the module docstring).
    ``contested`` (global partition numbers claimed twice in the newest
    generation) are withheld whoever gets them, so the follow-up round sees
    them unowned too; leaving them out of the simulation let the real
    follow-up re-place them and withhold again (issue 16).

    *Keep rule*: when the previous assignment is complete and balanced
    (:func:`kept`) and the settled target is not strictly more local, the
    previous assignment is returned instead: as many cross-rack partitions or
    fewer, and no move.  Needed because the general path is a search, not an
    optimum: its first target can be more local than the owners' but lose that
    in the follow-up round, which sees the moved partitions unowned and may
    settle less local than it started (issue 10: cross-rack 2, then 3 with four
    moves, where keeping everything had 3 and no move).
    """
    keep = kept(prep)
    if keep is not None and not cross_count(prep, keep):
        return Settlement(keep, True, 0)  # nothing can be more local than no cross-rack partition
    settled = _settle_search(prep, algorithm, contested)
    if (
        keep is not None
        and settled.holder != keep
        and cross_count(prep, settled.holder) >= cross_count(prep, keep)
    ):
        return Settlement(keep, True, settled.follow_ups)
    return settled


def _settle_search(prep: Prepared, algorithm: Algorithm, contested: Collection[int]) -> Settlement:
    """:func:`settle` without the keep rule: follow-up rounds until the target is a fixed point."""
    n_parts = prep.num_partitions
    proven: list[int] | None = None  # the last run's holder, if its cross-rack count is proven minimal

    def run(owner: list[int]) -> list[int]:
        nonlocal proven
        per_member, proven = algorithm(dataclasses.replace(prep, owner=owner, min_cross_holder=proven))
        return _holders(per_member, n_parts)

    holder = run(prep.owner)
    claim = list(prep.claim_owner)
    for gp in contested:
        claim[gp] = CONTESTED
    seen: tuple[list[int], list[int]] | None = None  # last follow-up input and its answer
    for rounds in range(MAX_FOLLOW_UPS):
        follow_up = [h if claim[gp] == -1 or claim[gp] == h else -1 for gp, h in enumerate(holder)]
        nxt = holder
        if follow_up != holder:
            if seen is not None and seen[0] == follow_up:
                nxt = seen[1]  # the same round again: same answer (the algorithm is deterministic)
            else:
                nxt = run(follow_up)  # the real follow-up round
                seen = (follow_up, nxt)
        if nxt == holder:
            nxt = run(holder)  # what the follow-up round checks in turn: everything owned
        if nxt == holder:
            return Settlement(holder, True, rounds)
        holder = nxt
    return Settlement(holder, False, MAX_FOLLOW_UPS)


def _moved(holder: list[int], claim: list[int]) -> int:
    """Claimed partitions ``holder`` takes from their claimant: this round's moves (contested ones included)."""
    return sum(1 for h, c in zip(holder, claim, strict=True) if c != -1 and h != c)


@dataclasses.dataclass(slots=True)
class _Work:
    """What one :func:`settle_general` call may still spend, and whether a limit cut its search."""

    runs: int
    edges: int = SETTLE_WORK
    cut: bool = False
    proven: list[int] | None = None  # the last search's holder, if its cross-rack count is proven minimal
    #: a round's answer (and its keep-first target) by owners: a pure function of them
    answers: dict[tuple[int, ...], tuple[list[int], list[int] | None]] = dataclasses.field(
        default_factory=dict
    )


def settle_general(prep: Prepared, contested: Collection[int] = ()) -> Settlement:
    """The unequal-subscription path's target, chosen by where the group *lands* (see the module docstring)."""
    work = _Work(MAX_RUNS)
    holder, fixed = _settle_general(prep, contested, work, 0)
    return Settlement(holder, fixed, MAX_RUNS - work.runs, SETTLE_WORK - work.edges)


def _settle_general(
    prep: Prepared, contested: Collection[int], work: _Work, depth: int
) -> tuple[list[int], bool]:
    """:func:`settle_general` at simulation depth ``depth``: the target, and whether it is proven stable.

    A target that withholds nothing is final.  Otherwise its follow-up round is computed by this very
    function on what the members will own (the real round runs it too, with more budget: when no
    limit cut the simulation, both take the same path), and the target is *stable* when that answer
    keeps every partition it was handed; the group then lands on the answer, with this round's moves.
    """
    claim = list(prep.claim_owner)
    for gp in contested:
        claim[gp] = CONTESTED

    def follow(holder: list[int]) -> list[int]:
        return [h if claim[gp] == -1 or claim[gp] == h else -1 for gp, h in enumerate(holder)]

    def run(
        owner: list[int], keep_owned: bool = False, price: int = 0, start: list[int] | None = None
    ) -> tuple[list[int], list[int] | None]:
        work.runs -= 1
        step = dataclasses.replace(
            prep,
            owner=owner,
            keep_owned=keep_owned,
            cross_price=price,
            start=start,
            min_cross_holder=work.proven,
        )
        found, keep, work.proven, spent = _choose(step)
        work.edges -= spent
        return found, keep

    def afford() -> bool:
        """Whether a run is still in budget; a refusal marks the search cut (see :func:`_settle_general`)."""
        if work.runs > 0 and work.edges > 0:
            return True
        work.cut = True
        return False

    def answer_to(owner: list[int]) -> tuple[list[int], list[int] | None]:
        """:func:`_choose` on these owners (memoised: it depends on nothing else)."""
        key = tuple(owner)
        got = work.answers.get(key)
        if got is None:
            got = work.answers[key] = run(owner=owner)
        return got

    first, keep_first = answer_to(prep.owner)
    if keep_first is None:
        keep_first = kept(prep)  # every partition owned and balanced: the keep-first run is the owners
    # (landed cross-rack, moves, -order, target, where it lands)
    stable: list[tuple[int, int, int, list[int], list[int]]] = []
    tried: list[list[int]] = []

    def spend() -> bool:
        """One run of the budget for the exact candidate's solver, if affordable."""
        if not afford():
            return False
        work.runs -= 1
        return True

    def exact(base: list[int]) -> list[int] | None:
        """The exact candidate from the balanced ``base`` (:mod:`.general_exact`), if it is better."""
        return None if prep.num_partitions > FRESH_LIMIT else exact_candidate(prep, base, spend)

    better: list[int] | None = None
    if follow(first) == first and answer_to(first)[0] == first:
        # Withholds nothing, and fed back it stays: final, unless an assignment over other counts
        # (which the search may never visit from these owners) is strictly better.
        better = exact(first)
        if better is None:
            return first, True
        tried.append(first)
        stable.append((cross_count(prep, first), _moved(first, claim), -1, first, first))

    def verdict(target: list[int]) -> tuple[list[int] | None, list[int] | None]:
        """(where the group lands if stable, else None; the follow-up's answer, None if a limit cut it)."""
        handed = follow(target)
        landed = target
        if handed != target:
            if depth >= MAX_DEPTH:
                work.cut = True
                return None, None
            if not afford():
                return None, None
            outer, work.cut = work.cut, False
            nxt = dataclasses.replace(prep, owner=handed, claim_owner=handed, min_cross_holder=None)
            landed, _ = _settle_general(nxt, (), work, depth + 1)
            inner, work.cut = work.cut, outer or work.cut
            if inner:
                return None, None  # the real round, with more budget, may answer differently
            if any(o >= 0 and landed[gp] != o for gp, o in enumerate(handed)):
                return None, landed  # the follow-up round withholds again
        # Fed back (a later round, nothing changed) it must stay.  That round is this function on owners
        # and claims ``landed``: this very call when that is our input (it returns ``landed`` if chosen);
        # else it returns ``landed`` at once when the round's answer is ``landed``; else computed.
        if landed == prep.owner == claim:
            return landed, landed
        fed = answer_to(landed)[0]
        if fed == landed:
            return landed, landed
        if depth >= MAX_DEPTH:
            work.cut = True
            return None, None
        if not afford():
            return None, None
        outer, work.cut = work.cut, False
        again, _ = _settle_general(
            dataclasses.replace(prep, owner=landed, claim_owner=landed, min_cross_holder=None),
            (),
            work,
            depth + 1,
        )
        inner, work.cut = work.cut, outer or work.cut
        if inner:
            return None, None
        return (landed, landed) if again == landed else (None, again)

    def explore(target: list[int] | None) -> None:
        for _ in range(MAX_FOLLOW_UPS):
            if target is None or target in tried:
                return
            tried.append(target)
            landed, answer = verdict(target)
            if landed is not None:
                stable.append((cross_count(prep, landed), _moved(target, claim), -len(tried), target, landed))
            # What the group would be handed next, tried as this round's target: after a stable target,
            # its landing (it may give a withheld partition back to its claimant: one move fewer).
            target = answer

    if better is not None:
        explore(better)
        return min(stable)[3], True
    explore(first)
    promised = (cross_count(prep, first), _moved(first, claim))
    if not stable or min(stable)[:2] > promised:
        if keep_first is None and afford():
            keep_first = run(prep.owner, keep_owned=True)[0]
        explore(keep_first)
    for price in CROSS_PRICES:
        # Still landing less locally or with more moves than promised: the promise was a target the
        # follow-up round cannot keep.  Searches that price a cross-rack partition at a few moves
        # propose targets that trade less locality for fewer moves (Kafka's revocations do).
        if (stable and min(stable)[:2] <= promised) or not afford():
            break
        explore(run(prep.owner, price=price)[0])
    if prep.num_partitions <= FRESH_LIMIT and afford():
        # The search keeps what is owned first, so the counts it reaches depend on the owners; from
        # nothing owned it can reach more local counts.  If so, the same search from that holder,
        # owners pricing the moves (at those counts the flow is exact), is one more candidate.
        fresh = run([-1] * prep.num_partitions)[0]
        if cross_count(prep, fresh) < (min(stable)[0] if stable else prep.num_partitions + 1) and afford():
            explore(run(prep.owner, start=fresh)[0])
    # The optimum over every balanced assignment (all count vectors), started from the best landing.
    explore(exact(min(stable)[4] if stable else first))
    if not stable:
        return first, False
    return min(stable)[3], True


def _choose(prep: Prepared) -> tuple[list[int], list[int] | None, list[int] | None, int]:
    """One round of the general path: its target, the keep-first target if computed, the search's proof,
    and the flow edges its count-shift searches built.

    The search (:func:`assign_general_proven`) may move owned partitions to end more local.  When it
    moves any, the keep-first run (``Prepared.keep_owned``: balancing's forced moves only) is computed
    too and returned instead when it is lexicographically no worse in (cross-rack partitions, moves):
    so a round never moves a partition for nothing it could see.  With every partition owned and the
    owners balanced, the keep-first run is the previous assignment itself (issue 10's keep rule).
    """
    n_parts = prep.num_partitions
    budget = Budget()
    per_member, proven = assign_general_proven(prep, budget)
    found = _holders(per_member, n_parts)
    moves = _moved(found, prep.owner)
    if not moves or prep.keep_owned:
        return found, None, proven, SHIFT_WORK - budget.edges
    keep_prep = dataclasses.replace(prep, keep_owned=True, min_cross_holder=None, start=None)
    if keep_first_floor(keep_prep) > cross_count(prep, found):
        return found, None, proven, SHIFT_WORK - budget.edges  # the keep-first run cannot be as local
    keep_budget = Budget()
    keep = _holders(assign_general_proven(keep_prep, keep_budget)[0], n_parts)
    spent = 2 * SHIFT_WORK - budget.edges - keep_budget.edges
    if (cross_count(prep, keep), _moved(keep, prep.owner)) <= (cross_count(prep, found), moves):
        return keep, keep, proven, spent
    return found, keep, proven, spent


def assign(cluster: Cluster, group: ConsumerGroup) -> ConsumerPlan:
    """The cooperative-sticky plan of ``group``: this round's assignment and what is revoked."""
    if not group.members:
        return ConsumerPlan(assignment={}, revoked={})
    prep = prepare(cluster, group)
    equal = len({m.topics for m in group.members}) == 1
    contested = contested_partitions(cluster, group)
    index = {t: i for i, t in enumerate(prep.topics)}
    contested_gp = [prep.topic_offset[index[t]] + p for t, p in contested if t in index]
    settled = settle(prep, _unproven, contested_gp) if equal else settle_general(prep, contested_gp)
    if not settled.fixed_point:
        import logging  # only here: ``rackplan assign`` on a consumer group never imports it otherwise

        logging.getLogger(__name__).warning(
            "cooperative-sticky: group %s has no fixed point after %d follow-up simulations; "
            "its real follow-up round may move partitions again",
            group.group_id,
            settled.follow_ups,
        )
    holder = settled.holder
    if len(holder) != prep.num_partitions or -1 in holder:
        gp = holder.index(-1) if -1 in holder else len(holder)
        raise PostconditionError(
            f"cooperative-sticky: {holder.count(-1)} of {prep.num_partitions} partitions have no holder "
            f"after settling (first: global partition {gp}); every subscribed partition must have one"
        )
    per_member: list[list[int]] = [[] for _ in prep.member_ids]
    for gp, i in enumerate(holder):
        per_member[i].append(gp)
    topics, offset, ptopic = prep.topics, prep.topic_offset, prep.part_topic
    assignment: dict[str, list[TopicPartition]] = {}
    for mid, parts in zip(prep.member_ids, per_member, strict=True):
        assignment[mid] = [(topics[ptopic[gp]], gp - offset[ptopic[gp]]) for gp in sorted(parts)]
    return withhold_moving(assignment, prep.claims, contested)
