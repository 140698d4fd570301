"""The count-shift search of the general cooperative-sticky path (see :mod:`rackplan.assignor.consumer.sticky.general_flow`).

At fixed counts :func:`~rackplan.assignor.consumer.sticky.general_flow.place` is exact; this
module chooses which counts to try: all shifts at once first, then one first
loser at a time with repairs and named gainers, within a deterministic work
budget.  Kept apart from the flow itself because it is the heuristic part:
each shift it keeps is exact and strictly cheaper, but it does not visit
every count vector.
"""

from __future__ import annotations

from .general_flow import Budget, place
from .general_state import GeneralState

#: Flows tried per first loser while repairing an unbalanced shift.
MAX_SHIFT_REPAIRS = 6
#: Flows of the all-at-once shift search (each improves, or bars one member from dropping or growing).
MAX_FREE_SHIFTS = 12


def shift_counts(state: GeneralState, budget: Budget) -> bool:
    """Apply improving count shifts until none is found (or the work budget is spent); True if any applied.

    First all shifts at once: every member may drop one and members at the
    bottom of a topic grow, in one flow, repaired by barring members from
    dropping or growing.  Then one first loser at a time (holders of
    cross-rack partitions first, fuller first): the flow picks the growing
    member with the topic minima as they are, and a member whose growth
    would itself raise a topic's minimum (the only subscriber at it) can
    unlock more, so those are then tried one by one as named gainers.
    Nothing is tried once every partition is with its owner (if it has one)
    and every cross-rack partition is unavoidable (no subscriber of its
    topic is local to it).  ``budget`` is the run's: every call of one run
    draws on it, so a run's shifts cost a bounded number of flow edges
    however often they improve.
    """
    applied, go_on = _free_shifts(state, budget)
    if not go_on:
        return applied
    failed = state.shift_failed
    while _avoidable_cross(state) and not budget.spent():
        progress = False
        cross = set(_cross_holders(state))
        for a in sorted(range(state.n), key=lambda i: (i not in cross, -state.cnt[i], i)):
            if budget.spent():
                break
            if _known_vain(failed.get(a), state, budget):
                continue
            before = budget.edges
            if _shift_from(state, a, budget):
                applied = progress = True
                if not _avoidable_cross(state):
                    break
            elif not budget.spent():
                failed[a] = (state.version, before - budget.edges)
        if not progress:
            break
    return applied


def _known_vain(known: tuple[int, int] | None, state: GeneralState, budget: Budget) -> bool:
    """Whether a search found nothing at this very holder (``known``: its version and charge), and the
    budget pays its charge again in full: then it is charged, not run.

    Why: :func:`shift_counts` runs again after every call that applied a shift, often at the holder
    where its searches had just found nothing, and a search is a function of the holder: it would
    build the same flows and find nothing again.  It is charged what it cost, flow by flow as it would
    be (with more than its charge left, each of its flows fits), so the search, the plan and the work
    tally are exactly those of running it.
    """
    if known is None or known[0] != state.version or budget.edges <= known[1]:
        return False
    budget.edges -= known[1]
    return True


def _free_shifts(state: GeneralState, budget: Budget) -> tuple[bool, bool]:
    """The all-at-once search (see :func:`shift_counts`): whether it applied a shift, and whether the
    one-loser searches may still gain (False: nothing avoidable is left, or the budget is spent).  Not
    run again where it found nothing (:func:`_known_vain`)."""
    if _known_vain(state.free_shift_failed, state, budget):
        return False, True
    before = budget.edges
    applied = False
    no_drop: set[int] = set()
    no_gain: set[int] = set()
    for _ in range(MAX_FREE_SHIFTS):
        if not _avoidable_cross(state) or budget.spent():
            return applied, False
        droppers = frozenset(i for i in range(state.n) if i not in no_drop)
        done = place(state, banned=frozenset(no_gain), droppers=droppers, budget=budget)
        if done is True:
            applied = True
            no_drop.clear()
            no_gain.clear()
        elif done is False:
            break
        elif done.kind == "ban":
            no_gain.add(done.member)
        elif done.kind == "keep":
            no_drop.add(done.member)
        else:
            break
    if not applied and not budget.spent():
        state.free_shift_failed = (state.version, before - budget.edges)
    return applied, True


def _shift_from(state: GeneralState, a: int, budget: Budget) -> bool:
    """One improving shift with ``a`` as first loser, if the repairs or a named gainer find one."""
    if not state.cnt[a]:
        return False
    losers, banned = frozenset([a]), frozenset[int]()
    for _ in range(MAX_SHIFT_REPAIRS):
        losers = _stranded(state, losers)
        done = place(state, losers, banned, budget=budget)
        if done is True:
            return True
        if done is False or budget.spent():
            break
        if done.kind == "ban":
            # The flow's choice of grower broke balance; with it named, every count is fixed.
            if place(state, losers, gainer=done.member, budget=budget) is True:
                return True
            banned |= {done.member}
        elif done.kind == "lose" and done.member not in losers:
            losers |= {done.member}
        else:
            break
    for d in _unique_minima(state, a):
        # ``d`` grows, which raises a topic's minimum; other members may then shift as well.
        droppers = frozenset(i for i in range(state.n) if i not in (a, d))
        for _ in range(MAX_SHIFT_REPAIRS):
            if budget.spent():
                return False
            done = place(state, frozenset([a]), banned, gainer=d, droppers=droppers, budget=budget)
            if done is True:
                return True
            if done is False:
                break
            if done.kind == "ban":
                banned |= {done.member}
            elif done.kind == "keep":
                droppers -= {done.member}
            else:
                break
    return False


def _cross_holders(state: GeneralState) -> list[int]:
    """Members holding a cross-rack partition, fullest first, then by number."""
    crossk, cls, masks = state.crossk, state.cls, state.masks
    holders = {h for gp, h in enumerate(state.holder) if crossk[cls[h]][masks[gp]]}
    return sorted(holders, key=lambda i: (-state.cnt[i], i))


def _avoidable_cross(state: GeneralState) -> bool:
    """Something a shift could still gain: a partition away from its (subscribed) owner, or a
    cross-rack partition with a subscriber of its topic that is local to it.

    A function of the holder, asked again and again at one (:func:`shift_counts` and
    :func:`_free_shifts` between flows): kept per state version (every move bumps it)."""
    known = state.avoidable
    if known[0] == state.version:
        return known[1]
    crossk, cls, masks, ptopic, owner = state.crossk, state.cls, state.masks, state.ptopic, state.owner
    local = state.local_bits
    keep = state.keep_owned
    found = False
    for gp, h in enumerate(state.holder):
        k = masks[gp]
        if 0 <= owner[gp] != h:
            found = True
            break
        if keep and owner[gp] == h:
            continue  # a keep-first run never moves it
        if crossk[cls[h]][k] and k & local[ptopic[gp]]:
            found = True
            break
    state.avoidable = (state.version, found)
    return found


def _stranded(state: GeneralState, losers: frozenset[int]) -> frozenset[int]:
    """``losers`` plus every member that, once they are one lower, may hold nothing at its count."""
    cnt = list(state.cnt)
    for i in losers:
        cnt[i] -= 1
    out = set(losers)
    at = cnt.__getitem__
    tm, mt = state.tm, state.mt
    for _ in range(MAX_SHIFT_REPAIRS):
        min_sub = [min(map(at, subs)) if subs else 0 for subs in tm]
        more = [
            i
            for i in range(state.n)
            if i not in out and cnt[i] > 0 and all(cnt[i] > min_sub[t] + 1 for t in mt[i])
        ]
        if not more:
            break
        for i in more:
            cnt[i] -= 1
            out.add(i)
    return frozenset(out)


def _unique_minima(state: GeneralState, loser: int) -> list[int]:
    """Members other than ``loser`` that are, with ``loser`` one lower, the only subscriber at some topic's minimum."""
    cnt = list(state.cnt)
    cnt[loser] -= 1
    at = cnt.__getitem__
    out: set[int] = set()
    for subs in state.tm:
        if not subs:
            continue
        low = min(map(at, subs))
        at_low = [i for i in subs if cnt[i] == low]
        if len(at_low) == 1 and at_low[0] != loser:
            out.add(at_low[0])
    return sorted(out)
