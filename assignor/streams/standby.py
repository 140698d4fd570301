"""Standby replicas: placement (default and client-tag aware, KIP-708) and rack-aware optimisation.

Spreading uses ``rack_aware_assignment_tags`` when set.  When no tags are set
and clients have racks, the client rack is used as the one tag, so standbys
land on other racks than their active where possible (Kafka's docs promise
this; its default path does not do it).

The least-loaded spread placement (:func:`assign_standbys`, then balancing)
fixes every client's standby count; :func:`optimise_standbys` then chooses,
exactly, which task goes where (:mod:`rackplan.assignor.streams.standby_flow`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence

from ..model import StreamsApp
from .standby_flow import NO_VALUE, GraphTooLarge, StandbyProblem, build_problem, solve
from .tasks import State, TaskModel

#: one tuple of spread values per client (None: the client has no value for that key); read only
Values = Sequence[tuple[str | None, ...]]


def spread_values(model: TaskModel, app: StreamsApp) -> list[tuple[str | None, ...]]:
    """The values standbys are spread over, per client; empty tuples when nothing spreads them."""
    if app.rack_aware_assignment_tags:
        keys = app.rack_aware_assignment_tags
        return [tuple(c.tags.get(k) for k in keys) for c in model.clients]
    if len({c.rack for c in model.clients if c.rack is not None}) > 1:
        return [(c.rack,) for c in model.clients]
    return [() for _ in model.clients]


def spread_kept(values: Values, task_holders: Sequence[int], src: int, dst: int) -> bool:
    """Moving a copy from ``src`` to ``dst`` keeps the number of distinct values of every key.

    A key loses a value only when ``src``'s value is held by no other holder
    and ``dst`` brings no value the others lack, so that is all this checks.
    """
    if not values or not values[0] or src not in task_holders:
        return True
    others = [values[c] for c in task_holders if c != src]
    gained = values[dst]
    for k, lost in enumerate(values[src]):
        if lost is None or any(v[k] == lost for v in others):
            continue
        new = gained[k]
        if new is None or any(v[k] == new for v in others):
            return False
    return True


def assign_standbys(model: TaskModel, state: State, num: int, values: Values, tasks: Sequence[int]) -> None:
    """Give each task ``num`` standbys on the least-loaded clients that do not hold it.

    With spread values, a client qualifies only when each of its values is not
    yet used by the task's holders, for every key that still has unused values
    (KIP-708); when none qualifies (possible with several keys), the task's
    remaining standbys wait until every task has been through this, then go to
    the least-loaded clients not holding it, in Kafka's order
    (:func:`java_hash_order`).  Fewer clients than replicas leave the rest
    unassigned, as Kafka does (with a warning).

    Clients with the same values qualify together, so each such class keeps
    its own least-loaded heap (:class:`_ClassHeaps`): one heap over all
    clients made every choice pop past the clients of used values (a third
    of all clients per standby with three racks), and comparing every
    class's top made it tasks x classes (each client its own tag value).
    """
    if num <= 0 or not tasks:
        return
    n_keys = len(values[0]) if values else 0
    all_values = [{v[k] for v in values if v[k] is not None} for k in range(n_keys)]
    members: dict[tuple[str | None, ...], list[int]] = {}
    for c in range(model.num_clients):
        members.setdefault(values[c] if values else (), []).append(c)
    heaps = _ClassHeaps(state, members)
    owner = state.active_owner()
    pending: dict[int, int] = {}  # task -> standbys left for the least-loaded pass
    for t in tasks:
        used = [{values[owner[t]][k]} for k in range(n_keys)]
        for placed in range(num):
            binding = [k for k in range(n_keys) if not all_values[k] <= used[k]]
            chosen = heaps.least_loaded(t, used, binding)
            if chosen is None:
                if binding:
                    pending[t] = num - placed  # no client on unused values of every key: later, least loaded
                break
            state.standby[chosen].add(t)
            heaps.loaded(chosen)
            for k in range(n_keys):
                used[k].add(values[chosen][k])
    for t in java_hash_order([model.tasks[t] for t in tasks], pending, model.index):
        for _ in range(pending[t]):
            chosen = heaps.least_loaded(t, [], [])
            if chosen is None:
                break
            state.standby[chosen].add(t)
            heaps.loaded(chosen)


def java_hash_order(names: Sequence[str], pending: Mapping[int, int], index: Mapping[str, int]) -> list[int]:
    """The pending tasks in the order Kafka visits them: its ``HashMap<TaskId, Integer>`` iteration order.

    Kafka's ``ClientTagAwareStandbyTaskAssignor`` keeps the standbys it could
    not spread in a ``HashMap`` filled with every stateful task in task order
    (``Collectors.toMap``), and hands them to the least-loaded clients in that
    map's order: by bucket (``TaskId.hashCode`` spread, modulo the table size
    the insertions grew it to), then insertion order.  Ids whose sub-topology
    or partition is not a Java int have no Kafka counterpart: task order.
    """
    keys = []
    for pos, name in enumerate(names):
        sub, _, part = name.rpartition("_")
        s, p = _java_int(sub), _java_int(part)
        if s is None or p is None:
            return [index[n] for n in names if index[n] in pending]
        h = (31 * (31 * (31 + s) + p)) & 0xFFFFFFFF  # Objects.hash(sub, part, null)
        keys.append((h ^ (h >> 16), pos, index[name]))
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2
    return [
        t for bucket, pos, t in sorted((h & (capacity - 1), pos, t) for h, pos, t in keys) if t in pending
    ]


def _java_int(s: str) -> int | None:
    """``s`` as the Java int of a Kafka ``TaskId`` part, or None: ASCII digits up to 2**31 - 1 only.

    The length is checked before ``int()``: a 5,000-digit sub-topology id (a
    valid id, sorted numerically) passed Python's 4,300-digit limit and ended
    the run with exit 1 until 2026-12-01 (found by a hunt).
    """
    digits = s.lstrip("0")
    if not (s.isascii() and s.isdigit()) or len(digits) > 10:
        return None
    v = int(digits or "0")  # Integer.parseInt reads "007" as 7
    return v if v < 2**31 else None


class _ClassHeaps:
    """The least-loaded clients of each class of equal spread values, and the classes by their least loaded.

    ``heaps[i]`` holds ``(load, client)`` for class ``i``, stale entries
    (the client's load rose since) dropped when met; ``order`` holds
    ``(entry, i)`` with ``entry`` at most class ``i``'s least-loaded entry:
    loads only rise while standbys are placed, so an entry there is a lower
    bound until refreshed.  A choice pops classes from ``order`` only while
    their bound is below the best client found, so it meets the classes
    that cannot take the task (used values) and the few that can, not all.
    """

    def __init__(self, state: State, members: Mapping[tuple[str | None, ...], list[int]]) -> None:
        self.state = state
        #: every client's load as :meth:`State.load` gives it, kept by :meth:`loaded` (the only change to
        #: the loads while standbys are placed): read per heap entry, where the method call was most of
        #: a choice's cost (issue 29)
        self.load = [state.load(c) for c in range(len(state.active))]
        self.classes = list(members)
        self.class_of = [0] * len(state.active)
        self.heaps: list[list[tuple[float, int]]] = []
        for i, key in enumerate(self.classes):
            for c in members[key]:
                self.class_of[c] = i
            self.heaps.append([(self.load[c], c) for c in members[key]])
            heapq.heapify(self.heaps[-1])
        self.order = [(heap[0], i) for i, heap in enumerate(self.heaps)]
        heapq.heapify(self.order)

    def loaded(self, c: int) -> None:
        """Client ``c``'s load rose: its old entry is stale now (dropped when met), its new one goes in."""
        self.load[c] = load = self.state.load(c)
        heapq.heappush(self.heaps[self.class_of[c]], (load, c))

    def least_loaded(self, t: int, used: list[set[str | None]], binding: list[int]) -> int | None:
        """The least-loaded client (ties: lowest index) not holding ``t`` with no used value on a binding key."""
        state, order, load = self.state, self.order, self.load
        best: tuple[float, int] | None = None
        seen: list[tuple[tuple[float, int], int]] = []
        while order and (best is None or order[0][0] < best):
            bound, i = heapq.heappop(order)
            heap = self.heaps[i]
            while load[heap[0][1]] != heap[0][0]:
                heapq.heappop(
                    heap
                )  # stale entry: every client keeps one current entry, so the heap stays full
            if heap[0] != bound:  # the bound was stale: the class goes back under its least-loaded entry
                heapq.heappush(order, (heap[0], i))
                continue
            seen.append((bound, i))
            key = self.classes[i]
            if any(key[k] is None or key[k] in used[k] for k in binding):
                continue
            top = _top(state, load, heap, t)
            if top is not None and (best is None or top < best):
                best = top
        for item in seen:
            heapq.heappush(order, item)
        return None if best is None else best[1]


def _top(state: State, loads: list[float], heap: list[tuple[float, int]], t: int) -> tuple[float, int] | None:
    """The heap's least-loaded client not holding ``t``, left in place; stale entries (``loads``: the
    clients' current loads) are dropped."""
    held: list[tuple[float, int]] = []
    top = None
    while heap:
        load, c = heap[0]
        if load != loads[c]:
            heapq.heappop(heap)  # stale entry
            continue
        if state.holds(c, t):
            held.append(heapq.heappop(heap))
            continue
        top = (load, c)
        break
    for item in held:
        heapq.heappush(heap, item)
    return top


def allowed_movement(
    values: Values, src: int, dst: int, tags: Sequence[Mapping[str, str]] | None = None
) -> bool:
    """Kafka's balancing predicate for spread standbys: may a standby of ``src`` move to ``dst``?

    With ``tags`` (the clients' tags, when the app spreads over tag keys),
    Kafka's ``ClientTagAwareStandbyTaskAssignor.isAllowedTaskMovement``:
    ``dst`` has every tag of ``src`` with the same value, the tags no key
    spreads over included (it compared the spread values only until
    2026-12-01, so a client's other tags, say its ``host``, let standbys
    move where Kafka's do not: found against Kafka's assignor by a hunt).
    Without (spread over racks), only between clients of the same values.
    """
    if tags is not None:
        theirs = tags[dst]
        return all(theirs.get(k) == v for k, v in tags[src].items())
    return not values or values[src] == values[dst]


def optimise_standbys(
    model: TaskModel,
    state: State,
    traffic: int,
    non_overlap: int,
    values: Values,
    cross_first: bool = False,
) -> int:
    """Move standbys to the cheapest placement that keeps every count and the spread; returns copies moved.

    Every client keeps its standby count and every task its number of
    standbys, no client gets a second copy of a task, and each task's
    standbys cover as many spread values other than its active's as they can
    (:mod:`rackplan.assignor.streams.standby_flow`, exact by one min-cost flow).  The
    cost is ``traffic * cross + non_overlap * moved`` (KIP-925's, exact), or
    with ``cross_first`` the fewest cross-rack changelog partitions, then
    the fewest copies moved.

    With two or more tag keys the rule (no key covers fewer values) is not
    one flow: each key is its own covering constraint.  There the flow is
    exact for a stricter rule, copies move only between clients with the same
    tags, and the pairwise swaps of :func:`swap_standbys` then continue from
    it; if swaps alone do better from the baseline, that result is kept.  That
    placement then starts the integer program of
    :mod:`rackplan.assignor.streams.standby_milp`, exact within its budget,
    whose answer is taken when strictly cheaper.  Where the flow's graph would
    pass :data:`~rackplan.assignor.streams.standby_flow.MAX_EDGES`, the swaps
    replace it (with several keys: the swaps and the program, as above).
    """
    if traffic == 0 or not any(state.standby):
        return 0
    groups = sorted(set(model.group_of))
    if all(len({model.standby_cross[t][g] for g in groups}) == 1 for s in state.standby for t in s):
        return 0  # every placement costs the same cross-rack: the baseline has no moves
    several = bool(values) and len(values[0]) > 1
    p = build_problem(model, state, _value_ids(model, values, several), keep_values=several)
    if p.racks_forced():
        return 0
    units = sum(p.count)
    if cross_first:
        a, b = units + 1, 1
    elif non_overlap == 0:
        a, b = traffic * (units + 1), 1  # moves are free: among the cheapest, the fewest moves
    else:
        a, b = traffic, non_overlap
    if all(
        a * (max(row) - min(row)) <= b
        for row in ([model.standby_cross[t][g] for g in groups] for t in p.tasks)
    ):
        # a moved copy costs b and saves at most a * (its task's cost range): no set of moves pays
        return 0
    swapped = [set(s) for s in state.standby]
    try:
        placement: dict[int, list[int]] | None = solve(p, a, b)
    except GraphTooLarge:
        placement = None
    for t, clients in (placement or {}).items():
        for c in p.baseline[t]:
            state.standby[c].discard(t)
        for c in clients:
            state.standby[c].add(t)
    if several:
        _several_keys(model, state, swapped, p, values, (traffic, non_overlap), (a, b))
    elif placement is None:  # the flow's graph would pass its bound: the swaps' heuristic instead
        swap_standbys(model, state, traffic, non_overlap, values)
    return sum(1 for c in range(model.num_clients) for t in state.standby[c] if c not in p.baseline[t])


def _value_ids(model: TaskModel, values: Values, several: bool) -> list[int]:
    """Per client, its spread value's number (with ``several`` keys: its tuple of values'), or ``NO_VALUE``."""
    if several:
        tuples = sorted(set(values), key=lambda v: tuple((x is None, x or "") for x in v))
        number = {v: i for i, v in enumerate(tuples)}
        return [number[v] for v in values]
    ids = sorted({v[0] for v in values if v and v[0] is not None})
    index = {v: i for i, v in enumerate(ids)}
    val = [index[v[0]] if v and v[0] is not None else NO_VALUE for v in values]
    return val or [NO_VALUE] * model.num_clients


def _several_keys(
    model: TaskModel,
    state: State,
    swapped: list[set[int]],
    p: StandbyProblem,
    values: Values,
    kip925: tuple[int, int],
    weights: tuple[int, int],
) -> None:
    """With several tag keys the flow is exact only for a stricter rule: Kafka-style swaps continue from it,
    swaps alone from the baseline (``swapped``) are kept if cheaper, and the integer program (exact within
    its budget) starts from the best of those; ``kip925`` are the weights the swaps use, ``weights`` the
    objective's.  :mod:`rackplan.assignor.streams.standby_milp` is imported here: it loads HiGHS (issue 29)."""
    from . import standby_milp

    (traffic, non_overlap), (a, b) = kip925, weights
    swap_standbys(model, state, traffic, non_overlap, values)
    reference = State(model)
    reference.active = state.active
    reference.standby = swapped
    swap_standbys(model, reference, traffic, non_overlap, values)
    if _cost(model, swapped, p.baseline, a, b) < _cost(model, state.standby, p.baseline, a, b):
        state.standby = swapped
    exact = standby_milp.place(model, p.owner, p.baseline, state.standby, values, a, b)
    if _cost(model, exact.standby, p.baseline, a, b) < _cost(model, state.standby, p.baseline, a, b):
        state.standby = exact.standby


def _cost(
    model: TaskModel, standby: Sequence[set[int]], baseline: dict[int, tuple[int, ...]], a: int, b: int
) -> int:
    """``a * cross + b * moved`` of a standby placement against the baseline's holders."""
    cross = model.standby_cross
    return sum(
        a * cross[t][model.group_of[c]] + (0 if c in baseline[t] else b)
        for c, tasks in enumerate(standby)
        for t in tasks
    )


def swap_standbys(
    model: TaskModel,
    state: State,
    traffic: int,
    non_overlap: int,
    values: Values,
    max_scan: int = 16,
    max_passes: int = 4,
) -> int:
    """Swap standbys between clients of different racks while a swap lowers the total cost.

    The optimisation step before the exact flow, kept for several tag keys
    (it continues from the stricter flow there) and as the bench's "before":
    a heuristic.  A swap keeps every client's standby count (so the
    balance), never puts a copy on a client that already holds the task, and,
    unlike Kafka, checks spreading for both tasks against all their holders.
    Returns the swaps made.
    """
    original = [set(s) for s in state.standby]
    groups = sorted(set(model.group_of))
    members: dict[int, list[int]] = {g: [] for g in groups}
    for c in range(model.num_clients):
        members[model.group_of[c]].append(c)
    owner = state.active_owner()
    standby_of: dict[int, list[int]] = {}
    for c in range(model.num_clients):
        for t in state.standby[c]:
            standby_of.setdefault(t, []).append(c)

    def cost(t: int, c: int) -> int:
        return traffic * model.standby_cross[t][model.group_of[c]] + (0 if t in original[c] else non_overlap)

    swaps = 0
    for _ in range(max_passes):
        made = 0
        for gi, g1 in enumerate(groups):
            for g2 in groups[gi + 1 :]:
                made += _swap_between(
                    model,
                    state,
                    members[g1],
                    members[g2],
                    g1,
                    g2,
                    cost,
                    traffic,
                    non_overlap,
                    values,
                    owner,
                    standby_of,
                    max_scan,
                )
        swaps += made
        if not made:
            break
    return swaps


def _swap_between(
    model: TaskModel,
    state: State,
    side_a: list[int],
    side_b: list[int],
    g1: int,
    g2: int,
    cost: Callable[[int, int], int],
    traffic: int,
    non_overlap: int,
    values: Values,
    owner: list[int],
    standby_of: dict[int, list[int]],
    max_scan: int,
) -> int:
    rep = {g1: side_a[0], g2: side_b[0]}
    # With rack-derived spread values every client of a rack has the same values,
    # so the spreading check depends on the rack only: filter candidates once.
    group_values = not values or (
        all(values[c] == values[rep[g1]] for c in side_a)
        and all(values[c] == values[rep[g2]] for c in side_b)
    )

    def candidates(side: list[int], other: int) -> list[tuple[int, int, int]]:
        out = []
        for c in side:
            for t in state.standby[c]:
                gain = cost(t, c) - traffic * model.standby_cross[t][other] - non_overlap
                if group_values and not spread_kept(values, [owner[t], *standby_of[t]], c, rep[other]):
                    continue
                out.append((-gain, t, c))
        out.sort()
        return out

    a_list = candidates(side_a, g2)
    b_list = candidates(side_b, g1)
    if not a_list or not b_list:
        return 0
    used_b = [False] * len(b_list)
    best_b = -b_list[0][0]
    first = 0
    made = 0
    for neg_ga, t1, a in a_list:
        ga = -neg_ga
        if ga + best_b <= 0:
            break
        if t1 not in state.standby[a]:
            continue
        while first < len(used_b) and used_b[first]:
            first += 1
        scanned = 0
        for bi in range(first, len(b_list)):
            neg_gb, t2, b = b_list[bi]
            if ga - neg_gb <= 0 or scanned >= max_scan:
                break
            if used_b[bi]:
                continue
            scanned += 1
            if t1 == t2 or t2 not in state.standby[b] or state.holds(b, t1) or state.holds(a, t2):
                continue
            gain = cost(t1, a) + cost(t2, b) - cost(t1, b) - cost(t2, a)
            if gain <= 0:
                continue
            h1 = [owner[t1], *standby_of[t1]]
            h2 = [owner[t2], *standby_of[t2]]
            if not (spread_kept(values, h1, a, b) and spread_kept(values, h2, b, a)):
                continue
            state.standby[a].discard(t1)
            state.standby[b].discard(t2)
            state.standby[b].add(t1)
            state.standby[a].add(t2)
            standby_of[t1] = [b if c == a else c for c in standby_of[t1]]
            standby_of[t2] = [a if c == b else c for c in standby_of[t2]]
            used_b[bi] = True
            made += 1
            break
    return made
