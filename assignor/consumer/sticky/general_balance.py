"""Step 3 of the general cooperative-sticky path: restore balance, moving owned partitions only as a last resort.

While a topic has a holder with two or more partitions over one of its
subscribers, close the gap.  First by an augmenting path of *free* partitions
(ones their holder did not own, so moving them costs nothing): one free
partition is handed along each step, so only the two ends change counts.  Into
the low member ``y``, from a member with at least two more (the sum of squared
counts drops); or with exactly one more when neither end can break balance by
it (the counts trade places and the gap closes by one without opening
another); else out of the high member, symmetrically.  Only if no such path
exists does an owned partition move, a non-matching one first.  Every step
lowers (sum of squares, total excess gap) lexicographically, so this ends.

Kept apart from :mod:`rackplan.assignor.consumer.sticky.general` because it is the one step that
trades stickiness for balance; the per-topic histograms of
:class:`~rackplan.assignor.consumer.sticky.general_state.GeneralState` make a step cost only the
topics of the members it touches, and its histogram of members holding free
partitions rules out hopeless path searches at once.
"""

from __future__ import annotations

from collections import deque

from .general_state import GeneralState

Move = tuple[int, int, int]  # (partition, from member, to member)
Parents = dict[int, tuple[int, int]]  # member -> (member it hands to / takes from, topic)


def balance(state: GeneralState) -> None:
    """Move partitions until no topic has a holder two or more above one of its subscribers."""
    queue = deque(range(state.n_topics))
    queued = [True] * state.n_topics
    while queue:
        t = queue.popleft()
        queued[t] = False
        while True:
            hh = state.hold_hist[t]
            if not hh:
                break
            hi = max(hh)
            lo = state.min_sub(t)
            if hi - lo < 2:
                break
            x = min(hh[hi])
            y = min(state.sub_hist[t][lo])
            moves = _free_path(state, y) or _free_path_out(state, x) or [_owned_move(state, t, x, y)]
            touched: set[int] = set()
            for gp, a, b in moves:
                state.move(gp, b)
                touched.update(state.mt[a])
                touched.update(state.hold[b])
            for u in sorted(touched):
                if not queued[u]:
                    queued[u] = True
                    queue.append(u)


def _free_path(state: GeneralState, y: int) -> list[Move] | None:
    """Moves handing one free partition along a path into ``y``, or None.

    The path starts at a member holding at least two more than ``y`` (the
    sum of squared counts drops), or exactly one more when neither end can
    break balance by it (``y`` may grow, the start may shrink): then the
    counts only trade places and the gap that made ``y`` a low subscriber
    closes by one, without opening any other.
    """
    need = state.cnt[y] + 2
    sideways = state.can_grow_held(y)
    if not state.free_hist or max(state.free_hist) < need - (1 if sideways else 0):
        return None  # no member could start such a path
    parent: Parents = {y: (-1, -1)}
    found = _search_into(state, y, need, sideways, parent)
    if found < 0:
        return None
    return [(_pick_free(state, z, w, v), z, w) for z, w, v in _walk_back(parent, found, y)]


def _search_into(state: GeneralState, y: int, need: int, sideways: bool, parent: Parents) -> int:
    """Breadth-first search, from ``y`` back along free partitions, for where a path into ``y`` starts; -1 if none."""
    cnt = state.cnt
    expanded: set[int] = set()
    min_cache: dict[int, int] = {}
    frontier = [y]
    for w in frontier:
        for v in state.mt[w]:
            if v in expanded:
                continue
            fh = state.freeh[v]
            if not fh:
                continue
            ms = min_cache.get(v)
            if ms is None:
                ms = min_cache[v] = state.min_sub(v)
            # y grows by one; any other step keeps its count but starts holding topic v.
            if cnt[w] > (ms if w == y else ms + 1):
                continue
            expanded.add(v)
            for z in fh:
                if z in parent:
                    continue
                parent[z] = (w, v)
                if cnt[z] >= need or (sideways and cnt[z] == need - 1 and state.can_shrink(z)):
                    return z
                frontier.append(z)
    return -1


def _free_path_out(state: GeneralState, x: int) -> list[Move] | None:
    """Moves handing one free partition along a path out of ``x``, or None (mirror of :func:`_free_path`)."""
    if not state.free_total[x]:
        return None  # a path out of x starts with a free partition of x
    parent: Parents = {x: (-1, -1)}
    found = _search_out_of(state, x, parent)
    if found < 0:
        return None
    return [(_pick_free(state, w, z, v), w, z) for z, w, v in reversed(_walk_back(parent, found, x))]


def _search_out_of(state: GeneralState, x: int, parent: Parents) -> int:
    """Breadth-first search, from ``x`` along free partitions, for where a path out of ``x`` ends; -1 if none."""
    cnt = state.cnt
    low = cnt[x] - 2
    sideways = state.can_shrink(x)
    expanded: set[int] = set()
    min_cache: dict[int, int] = {}
    frontier = [x]
    for w in frontier:
        for v in state.hold[w]:
            if v in expanded or not state.freeh[v].get(w, 0):
                continue
            expanded.add(v)
            ms = min_cache.get(v)
            if ms is None:
                ms = min_cache[v] = state.min_sub(v)
            for z in state.tm[v]:
                if z in parent:
                    continue
                c = cnt[z]
                # A step keeps its count but starts holding v; the end grows by one.
                end = c <= low or (sideways and c == low + 1 and state.can_grow_held(z))
                if end and c <= ms:
                    parent[z] = (w, v)
                    return z
                if c <= ms + 1:
                    parent[z] = (w, v)
                    frontier.append(z)
    return -1


def _walk_back(parent: Parents, end: int, start: int) -> list[tuple[int, int, int]]:
    """Steps ``(z, w, topic)`` from ``end`` back to ``start`` along ``parent``."""
    steps = []
    z = end
    while z != start:
        w, v = parent[z]
        steps.append((z, w, v))
        z = w
    return steps


def _pick_free(state: GeneralState, z: int, w: int, v: int) -> int:
    """The free partition of topic ``v`` that ``z`` should hand to ``w``: back to its owner, then locality."""
    cz, cw = state.crossk[state.cls[z]], state.crossk[state.cls[w]]
    owner, masks = state.owner, state.masks
    return min(
        (owner[gp] != w, cw[masks[gp]] - cz[masks[gp]], gp) for gp in state.hold[z][v] if owner[gp] != z
    )[2]


def _owned_move(state: GeneralState, t: int, x: int, y: int) -> Move:
    """An owned partition of topic ``t`` from ``x`` to ``y``: a non-matching one first, then locality at ``y``."""
    cx, cy = state.crossk[state.cls[x]], state.crossk[state.cls[y]]
    masks = state.masks
    gp = min((1 - cx[masks[gp]], cy[masks[gp]], gp) for gp in state.hold[x][t])[2]
    return (gp, x, y)
