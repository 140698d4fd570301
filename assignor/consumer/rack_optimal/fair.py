"""Which partition counts the "fair" assignments of a group with unequal subscriptions give each member.

Fair means: the sum of squared member counts is minimal.  Every fair
assignment is balanced in the contract's sense (invariant 2): moving one
partition from a member holding ``c`` to one holding ``c - 2`` or fewer would
lower the sum of squares.  With equal subscriptions the fair assignments are
exactly the balanced ones (counts ``floor(P/N)`` or ``ceil(P/N)``).

Members with the same subscription are interchangeable here, so the work is
done over subscription classes (``sizes[s]`` members each) and topic groups
(topics with the same subscribing classes, ``group_sizes[g]`` partitions):

1. Water-fill each group's partitions onto its least-loaded subscribers, then
   remove every improving path (a chain of single-partition moves from a member
   holding ``c`` to one holding at most ``c - 2``).  An assignment without such
   a path minimises the sum of squares (the semi-matching optimality criterion
   of Harvey, Ladner, Lovász and Tamir).
2. Read off a *box*: per class a low count ``low[s]`` and whether ``low[s] + 1``
   is possible.  The fair count vectors form an M-convex set lying in a box of
   width one (Frank and Murota, discrete decreasing minimisation), and a member
   can take another value in some fair assignment exactly when one
   count-neutral path (from a member holding one more, or to a member holding
   one fewer) reaches it in the fair assignment found.  So every fair
   assignment gives each member of class ``s`` either ``low[s]`` or, when
   allowed, ``low[s] + 1``, and inside that box the sum of squares is linear:
   ``low**2`` plus ``2 * low + 1`` per member at ``low + 1``.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Sequence


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def fair_box(
    sizes: Sequence[int], group_sizes: Sequence[int], group_subs: Sequence[Sequence[int]]
) -> tuple[list[int], list[bool]]:
    """Per class: the low count of its members in every fair assignment, and whether low + 1 occurs.

    ``group_subs[g]`` lists the classes subscribing to group ``g`` (non-empty).
    """
    n_cls = len(sizes)
    held: list[dict[int, int]] = [{} for _ in range(n_cls)]  # held[s][g] = partitions of g on class s
    total = [0] * n_cls
    # 1a. Water-fill, most constrained groups first.
    order = sorted(range(len(group_sizes)), key=lambda g: (sum(sizes[s] for s in group_subs[g]), g))
    for g in order:
        left = group_sizes[g]
        heap = [(total[s] // sizes[s], s) for s in group_subs[g]]
        heapq.heapify(heap)
        while left:
            level, s = heapq.heappop(heap)
            take = min(left, (level + 1) * sizes[s] - total[s])
            total[s] += take
            held[s][g] = held[s].get(g, 0) + take
            left -= take
            heapq.heappush(heap, (total[s] // sizes[s], s))
    # 1b. Remove improving paths.
    _remove_improving_paths(sizes, group_subs, held, total)
    # 2. The box.
    lo = [total[s] // sizes[s] for s in range(n_cls)]
    hi = [_ceil(total[s], sizes[s]) for s in range(n_cls)]
    low = list(lo)
    extra = [lo[s] != hi[s] for s in range(n_cls)]
    flat = [s for s in range(n_cls) if lo[s] == hi[s]]
    subscribed: list[list[int]] = [[] for _ in range(n_cls)]
    for g, subs in enumerate(group_subs):
        for s in subs:
            subscribed[s].append(g)
    holders: list[list[int]] = [[] for _ in range(len(group_subs))]
    for s, gs in enumerate(held):
        for g in gs:
            holders[g].append(s)
    for q in sorted({lo[s] for s in flat}):
        at_q = [s for s in flat if lo[s] == q]
        up = _reach(held, group_subs, [a for a in range(n_cls) if hi[a] == q + 1])
        down = (
            _reach(subscribed, holders, [b for b in range(n_cls) if lo[b] == q - 1]) if q else [False] * n_cls
        )
        for s in at_q:
            if up[s] and down[s]:
                raise AssertionError("a class both gains and loses: the assignment was not fair")
            if up[s] or down[s]:
                extra[s] = True
                low[s] = q - down[s]
    return low, extra


def _reach(
    out_groups: Sequence[Iterable[int]], group_classes: Sequence[Sequence[int]], starts: list[int]
) -> list[bool]:
    """Classes reached from ``starts``: class ``a`` leads to groups ``out_groups[a]``, group ``g`` to ``group_classes[g]``.

    Forwards (``held``, ``group_subs``): classes a partition held by ``starts``
    can reach through a chain of single moves.  Backwards (``subscribed``,
    ``holders``): classes that can pass a partition to one of ``starts``.
    Starts are marked reached too; callers only ask about other classes.
    """
    seen = [False] * len(out_groups)
    seen_g = [False] * len(group_classes)
    queue = deque(starts)
    for a in starts:
        seen[a] = True
    while queue:
        a = queue.popleft()
        for g in out_groups[a]:
            if seen_g[g]:
                continue
            seen_g[g] = True
            for b in group_classes[g]:
                if not seen[b]:
                    seen[b] = True
                    queue.append(b)
    return seen


def _remove_improving_paths(
    sizes: Sequence[int], group_subs: Sequence[Sequence[int]], held: list[dict[int, int]], total: list[int]
) -> None:
    """Apply improving paths (each as many units as stay improving) until there is none."""
    n_cls = len(sizes)
    hi = [_ceil(total[s], sizes[s]) for s in range(n_cls)]
    lo = [total[s] // sizes[s] for s in range(n_cls)]
    while True:
        path = _improving_path(group_subs, held, total, hi, lo)
        if not path:
            return
        src, found = path[-1][0], path[0][2]
        bottleneck = min(held[a][g] for a, g, _ in path)
        units = 0
        na, nb = sizes[src], sizes[found]
        while (
            units < bottleneck
            and total[src] - units > 0
            and _ceil(total[src] - units, na) >= (total[found] + units) // nb + 2
        ):
            units += 1
        for a, g, b in path:
            held[a][g] -= units
            if not held[a][g]:
                del held[a][g]
            held[b][g] = held[b].get(g, 0) + units
        for s, delta in ((src, -units), (found, units)):
            total[s] += delta
            hi[s] = _ceil(total[s], sizes[s])
            lo[s] = total[s] // sizes[s]


def _improving_path(
    group_subs: Sequence[Sequence[int]],
    held: list[dict[int, int]],
    total: list[int],
    hi: list[int],
    lo: list[int],
) -> list[tuple[int, int, int]]:
    """Steps (from class, group, to class), last step first, from a class holding ``c`` to one holding ``c - 2``.

    Searches from the most loaded classes down; empty when there is no such path.
    """
    n_cls = len(total)
    for top in sorted({h for h in hi if h >= 2}, reverse=True):
        sources = [a for a in range(n_cls) if hi[a] >= top and total[a]]
        parent: list[tuple[int, int] | None] = [None] * n_cls
        seen = [False] * n_cls
        seen_g = [False] * len(group_subs)
        queue = deque(sources)
        for a in sources:
            seen[a] = True
        while queue:
            a = queue.popleft()
            for g in sorted(held[a]):
                if seen_g[g]:
                    continue
                seen_g[g] = True
                for b in group_subs[g]:
                    if seen[b]:
                        continue
                    seen[b] = True
                    parent[b] = (a, g)
                    if lo[b] <= top - 2:
                        path: list[tuple[int, int, int]] = []
                        while (step := parent[b]) is not None:
                            path.append((step[0], step[1], b))
                            b = step[0]
                        return path
                    queue.append(b)
    return []
