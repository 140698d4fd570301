"""cooperative-sticky's settling for equal subscriptions: follow-up rounds run here until the target stays.

The follow-up round (:func:`settle` runs it here) sees members owning this
round's target minus the withheld partitions, and itself checks the case where
everything it assigns is owned.  ``R`` (see :mod:`.plan`) does not shrink monotonically with
ownership (a member owning more may drop to ``q`` and release an older
partition), so a one-shot optimum could be improved in the follow-up round,
which would then withhold again.  We therefore run both rounds here, taking
their answer as the new target, until the target is a fixed point of both: the
real follow-up then reproduces it and withholds nothing, and feeding the
converged plan back changes nothing.  Each change either keeps the cross-rack
count and re-places only withheld partitions, or lowers the cross-rack count
(the target is the re-run's only zero-move solution), so this ends.  The
simulations are capped at :data:`MAX_FOLLOW_UPS`; a target still changing then
is returned with ``Settlement.fixed_point`` False and :func:`.plan.assign`
logs a warning naming the group (the plan stays valid; its real follow-up may
move partitions again).  Every partition must have a holder when settling
ends: if not, the write-back is broken and
:class:`~rackplan.assignor.flow.PostconditionError` says which.  Keep rule:
when every partition is validly owned by a subscriber and that previous
assignment is balanced, it is returned unless the settled target is strictly
more local.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from ...record import record, replace
from .common import Prepared, cross_count
from .constrained import assign_constrained, compiled_holder

#: Bound on follow-up simulations; each one that changes the target lowers its cost (see module docstring).
MAX_FOLLOW_UPS = 16

#: Claim marker of a contested partition in :func:`settle`: no member number equals it.
CONTESTED = -2


def holders(per_member: list[list[int]], n_parts: int) -> list[int]:
    """The holder of each global partition (-1 for none) from the partitions per member."""
    holder = [-1] * n_parts
    for i, parts in enumerate(per_member):
        for gp in parts:
            holder[gp] = i
    return holder


#: An assignment algorithm: the holder of each partition, and it again when its cross-rack count is proven minimal.
Algorithm = Callable[[Prepared], tuple[list[int], list[int] | None]]

#: A proof about an :data:`Algorithm`: True only when, every member owning what the holder gives it,
#: the algorithm would return that holder (so settling need not run it to know).
KeepsItself = Callable[[Prepared, list[int]], bool]

#: The search of :func:`settle` with an :data:`Algorithm`, compiled: given the prepared view, the claims
#: as the search marks them and the cap on follow-ups, ``(holder, fixed_point, rounds)`` exactly as the
#: Python search answers, or None to let the Python search.
CompiledSearch = Callable[[Prepared, list[int], int], tuple[list[int], bool, int] | None]


def unproven(prep: Prepared) -> tuple[list[int], list[int] | None]:
    """The equal-subscription path as an :data:`Algorithm`: its one exact flow (compiled where the install
    has the core), no proof handed on."""
    holder = compiled_holder(prep)
    if holder is None:
        holder = holders(assign_constrained(prep), prep.num_partitions)
    return holder, None


@record(frozen=True)
class Settlement:
    """What :func:`settle` reached: the holder of each partition, and whether it is a fixed point.

    ``fixed_point`` is False only when :data:`MAX_FOLLOW_UPS` simulations
    kept changing the target (:func:`settle`; never seen), or when no candidate
    was found stable (:func:`~.general_settle.settle_general`, whose ``follow_ups`` counts the
    runs it spent): the plan is still valid and balanced, but the real
    follow-up round may move partitions again.  :func:`.plan.assign` logs a warning then.
    """

    holder: list[int]
    fixed_point: bool
    follow_ups: int
    #: flow edges the count-shift searches built (:func:`~.general_settle.settle_general`; 0 where not counted)
    shift_edges: int = 0


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


def settle(
    prep: Prepared,
    algorithm: Algorithm,
    contested: Collection[int] = (),
    keeps_itself: KeepsItself | None = None,
    compiled: CompiledSearch | None = None,
) -> Settlement:
    """The target holder of each partition, a fixed point of the follow-up round.

    The follow-up round sees every member owning its target minus what this
    round withholds, the withheld partitions owned by nobody.  Running that
    round here and taking its answer as the new target until it changes
    nothing makes the real follow-up move nothing (see the module docstring).
    ``contested`` (global partition numbers claimed twice in the newest
    generation) are withheld whoever gets them, so the follow-up round sees
    them unowned too; leaving them out of the simulation let the real
    follow-up re-place them and withhold again (issue 16).  ``keeps_itself``,
    when given, spares the last simulation where it proves its answer (the
    equal path: :func:`~.constrained.keeps_itself`; the same target either way).  ``compiled``, when given,
    is the same search in C (the equal path: :func:`~.constrained.compiled_search`), tried first.

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
    settled = _settle_search(prep, algorithm, contested, keeps_itself, compiled)
    if (
        keep is not None
        and settled.holder != keep
        and cross_count(prep, settled.holder) >= cross_count(prep, keep)
    ):
        return Settlement(keep, True, settled.follow_ups)
    return settled


def _settle_search(
    prep: Prepared,
    algorithm: Algorithm,
    contested: Collection[int],
    keeps_itself: KeepsItself | None,
    compiled: CompiledSearch | None = None,
) -> Settlement:
    """:func:`settle` without the keep rule: follow-up rounds until the target is a fixed point."""
    claim = list(prep.claim_owner)
    for gp in contested:
        claim[gp] = CONTESTED
    if compiled is not None:
        answer = compiled(prep, claim, MAX_FOLLOW_UPS)
        if answer is not None:
            return Settlement(*answer)
    proven: list[int] | None = None  # the last run's holder, if its cross-rack count is proven minimal

    def run(owner: list[int]) -> list[int]:
        nonlocal proven
        same = owner is prep.owner and proven is prep.min_cross_holder  # the first run: no copy needed
        holder, proven = algorithm(prep if same else replace(prep, owner=owner, min_cross_holder=proven))
        return holder

    holder = run(prep.owner)
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
            if keeps_itself is not None and keeps_itself(prep, holder):  # proven: it would answer ``holder``
                return Settlement(holder, True, rounds)
            nxt = run(holder)  # what the follow-up round checks in turn: everything owned
        if nxt == holder:
            return Settlement(holder, True, rounds)
        holder = nxt
    return Settlement(holder, False, MAX_FOLLOW_UPS)
