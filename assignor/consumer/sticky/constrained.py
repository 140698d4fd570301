"""cooperative-sticky when every member subscribes to the same topics (Kafka's "constrained" path).

Every member ends with ``q = P // N`` or ``q + 1`` partitions, exactly
``P % N`` of them with ``q + 1``.  Kafka's rule for owned partitions is kept as
a hard constraint: a member keeps ``min(|L|, cap)`` of its owned partitions
that match its rack (``L``: it has no rack, or a replica is in its rack),
``cap`` being the quota it ends with.  Everything else is decided by one exact
min-cost flow with cost ``BIG * cross_rack + moves`` (``BIG`` larger than any
number of moves, so cross-rack first, then moves):

* which members get ``q + 1`` (the ``extra`` node takes one unit per such member),
* which of its other owned partitions a member keeps (cross-rack ones cost
  ``BIG`` where they are; a released one costs 1 plus ``BIG`` if cross-rack
  where it lands),
* which matching partitions a member owning more than ``q`` of them releases, and
* where free partitions go (unowned, from departed members, or released).

Cost depends only on a member's rack class and a partition's replica mask, so
the graph has one node per partition mask, one per rack class and a few per
*profile*: members with the same class, the same room and the same counts of
owned partitions per mask are interchangeable, so they share nodes and the
flow is split among them afterwards (see :func:`_cyclic`).  Free partitions
reach members through their class node and are dealt round robin, between
classes and then to the members of a class, as Kafka deals; a member owning
more than ``q`` matching partitions takes nothing else.  The graph has a few
hundred nodes even for thousands of members, so the whole path is linear in
partitions plus a flow that does not grow with them.

:func:`keeps_itself` proves, without running the path, when a holder fed back
as everyone's ownership would come back unchanged (settling's last check).
"""

from __future__ import annotations

from collections.abc import Callable

from ...flow import FlowGraph
from ...flow.compiled import CORE
from .common import Prepared, cross_count, deal

#: (over-full?, rack class, room below q, owned counts per mask: local ones if over-full, else cross-rack)
Profile = tuple[int, int, int, tuple[tuple[int, int], ...]]


def _cyclic(amounts: list[tuple[int, int]], n_members: int) -> list[dict[int, int]]:
    """Split per-mask totals among ``n_members`` identical members, round robin over one sequence.

    Units of mask ``k1``, then ``k2``, ... are dealt in turn to members 0, 1, ...
    continuing where the previous mask stopped.  Member ``j`` gets
    ``total // n + (j < total % n)`` units in all and at most ``ceil(a_k / n)``
    of mask ``k``, which is why a profile-level flow always splits into
    per-member amounts its members can honour.
    """
    out: list[dict[int, int]] = [{} for _ in range(n_members)]
    pos = 0
    for k, a in amounts:
        if not a:
            continue
        base, extra = divmod(a, n_members)
        for step in range(n_members):
            j = (pos + step) % n_members
            take = base + (1 if step < extra else 0)
            if take:
                out[j][k] = out[j].get(k, 0) + take
        pos = (pos + a) % n_members
    return out


def compiled_holder(prep: Prepared) -> list[int] | None:
    """:func:`assign_constrained`'s holder of each partition from the compiled core (``_constrained.c``), or
    None where this install has no core or the core hands the input back (the Python answers then).

    The same profiles, graph, flow and write-back in C: on small groups the Python's fixed cost per call
    was most of the path (issue 29; docs/performance.md, session 38)."""
    if CORE is None:
        return None
    return CORE.constrained(prep.part_mask, prep.owner, prep.member_class, prep.classes)


def compiled_search(prep: Prepared, claim: list[int], max_rounds: int) -> tuple[list[int], bool, int] | None:
    """Settling's search (:func:`~.settling.settle` without its keep rule) with this path as its algorithm,
    from the compiled core: ``(holder, fixed_point, rounds)``, the Python's, or None where this install has
    no core or the core hands the input back.  ``claim`` is settling's (-2 marks a contested partition).

    The whole search in C, not only its runs: on small groups the Python between them (the follow-up
    round's input, :func:`keeps_itself`'s counts) cost about as much as the compiled runs (issue 29)."""
    if CORE is None:
        return None
    return CORE.constrained_settle(
        prep.part_mask, prep.owner, claim, prep.member_class, prep.classes, max_rounds
    )


def assign_constrained(prep: Prepared) -> list[list[int]]:
    """Partitions (global numbers) per member; see the module docstring.  The compiled core's oracle and
    fallback (:func:`compiled_holder`)."""
    n = len(prep.member_ids)
    n_parts = prep.num_partitions
    q, r = divmod(n_parts, n)
    masks = prep.part_mask
    owner = prep.owner
    cls = prep.member_class
    n_cls = len(prep.classes)
    keep = prep.matches

    # local: owned and rack-matching (Kafka keeps these); remote: owned, not matching (cross-rack,
    # or no known replica rack), kept only when that is no worse.
    local: list[dict[int, list[int]]] = [{} for _ in range(n)]
    remote: list[dict[int, list[int]]] = [{} for _ in range(n)]
    free: dict[int, list[int]] = {}
    for gp in range(n_parts):
        o = owner[gp]
        k = masks[gp]
        if o < 0:
            free.setdefault(k, []).append(gp)
        elif keep(cls[o], k):
            local[o].setdefault(k, []).append(gp)
        else:
            remote[o].setdefault(k, []).append(gp)
    n_local = [sum(len(v) for v in d.values()) for d in local]

    # Profiles: (over?, class, room or local counts, cross counts) -> members.
    profiles: dict[Profile, list[int]] = {}
    forced = False
    for i in range(n):
        if n_local[i] > q:
            # Full of its own local partitions whatever its quota: its cross-rack ones must go.
            for k, lst in remote[i].items():
                free.setdefault(k, []).extend(lst)
                forced = True
            key = (1, cls[i], 0, tuple(sorted((k, len(v)) for k, v in local[i].items())))
        else:
            key = (0, cls[i], q - n_local[i], tuple(sorted((k, len(v)) for k, v in remote[i].items())))
        profiles.setdefault(key, []).append(i)
    if forced:
        for lst in free.values():
            lst.sort()

    big = n_parts + 1
    graph = FlowGraph()
    node, edge = graph.add_node, graph.add_edge
    row = _cost_rows(prep, big)

    hub = [node() for _ in range(n_cls)]
    extra = node(-r)
    free_masks = sorted(k for k, v in free.items() if v)
    free_edges: list[list[int]] = []
    for k in free_masks:
        f = node(len(free[k]))
        free_edges.append(_fan_out(graph, f, hub, len(free[k]), row(k, 0)))

    plan: list[tuple[Profile, list[int], int, list[tuple[int, int, list[int]]]]] = []
    for key in sorted(profiles):
        over, g, room, vec = key
        members = profiles[key]
        c = len(members)
        m_node = node(-c * q if over else -c * room)
        e_extra = edge(m_node, extra, c, 0)
        if not over:
            edge(hub[g], m_node, c * (room + 1), 0)
        pools = []
        for k, cnt in vec:
            src = node(c * cnt)
            keep_cost = 0 if over else big * prep.cross(g, k)
            stay = edge(src, m_node, c * cnt, keep_cost)
            out = _fan_out(graph, src, hub, c * cnt, row(k, 1))
            pools.append((k, stay, out))
        plan.append((key, members, e_extra, pools))

    flow = graph.solve().flow

    result: list[list[int]] = [[] for _ in range(n)]
    incoming: list[list[int]] = [[] for _ in range(n_cls)]
    for k, fe in zip(free_masks, free_edges, strict=True):
        for g, gp in deal(free[k], [(g, flow[fe[g]]) for g in range(n_cls)]):
            incoming[g].append(gp)

    slots: list[list[tuple[int, int]]] = [[] for _ in range(n_cls)]  # (member, free slots) per class
    for key, members, e_extra, pools in plan:
        over, g, _room, _vec = key
        c = len(members)
        n_extra = flow[e_extra]
        kept = _cyclic([(k, flow[stay]) for k, stay, _ in pools], c)
        released: dict[int, list[int]] = {}
        for j, i in enumerate(members):
            cap = q + (1 if j < n_extra else 0)
            owned = local[i] if over else remote[i]
            if not over:
                for lst in local[i].values():
                    result[i].extend(lst)
            for k, lst in owned.items():
                a = kept[j].get(k, 0)
                result[i].extend(lst[:a])
                released.setdefault(k, []).extend(lst[a:])
            room_left = cap - len(result[i])
            if room_left < 0:
                raise AssertionError(f"profile split over capacity for member {i}")
            if room_left:
                slots[g].append((i, room_left))
        for k, _stay, out in pools:
            for h, gp in deal(sorted(released.get(k, [])), [(h, flow[out[h]]) for h in range(n_cls)]):
                incoming[h].append(gp)

    for g in range(n_cls):
        for i, gp in deal(sorted(incoming[g]), sorted(slots[g])):
            result[i].append(gp)
    return result


def fewest_cross(prep: Prepared) -> int:
    """The fewest cross-rack partitions of any assignment with this path's counts, Kafka's keep rule aside.

    Counts are ``q`` per member and ``r`` of them one more (see the module docstring).  Cost depends
    only on a partition's replica mask and a member's rack class, so this is one transportation flow
    from masks to classes: a class takes ``q`` per member and up to one more per member, ``r`` more
    in all.  A few nodes per mask and class, whatever the group's size.
    """
    n = len(prep.member_ids)
    q, r = divmod(prep.num_partitions, n)
    per_mask: dict[int, int] = {}
    for k in prep.part_mask:
        per_mask[k] = per_mask.get(k, 0) + 1
    size = [0] * len(prep.classes)
    for g in prep.member_class:
        size[g] += 1
    graph = FlowGraph()
    classes = [graph.add_node(-q * c) for c in size]
    extra = graph.add_node(-r)
    for g, c in enumerate(size):
        graph.add_edge(classes[g], extra, c, 0)
    # Cross-rack supply goes through one hub (cost 1 in, 0 out to every racked class): the same
    # optimum as an arc per (mask, class), with arcs per mask only for the classes it is local to.
    hub = graph.add_node()
    racked = [g for g, (has_rack, _) in enumerate(prep.classes) if has_rack]
    for g in racked:
        graph.add_edge(hub, classes[g], prep.num_partitions, 0)
    local = _local_classes(prep)
    for k in sorted(per_mask):
        source = graph.add_node(per_mask[k])
        if k and racked:
            graph.add_edge(source, hub, per_mask[k], 1)
        for g in local(k):
            graph.add_edge(source, classes[g], per_mask[k], 0)
    return graph.solve().cost


def _local_classes(prep: Prepared) -> Callable[[int], list[int]]:
    """The classes a partition of mask ``k`` is not cross-rack for (``prep.cross(g, k) == 0``):
    rack-less ones and those of its replicas' racks, every class when ``k`` is 0.  Sorted."""
    rackless = [g for g, (has_rack, _) in enumerate(prep.classes) if not has_rack]
    by_bit = {bit: g for g, (has_rack, bit) in enumerate(prep.classes) if has_rack and bit}
    everyone = list(range(len(prep.classes)))

    def local(k: int) -> list[int]:
        if not k:
            return everyone
        out = list(rackless)
        m = k
        while m:
            low = m & -m
            m ^= low
            g = by_bit.get(low)
            if g is not None:
                out.append(g)
        out.sort()
        return out

    return local


def _cost_rows(prep: Prepared, big: int) -> Callable[[int, int], list[int]]:
    """``row(k, plus)[g] == big * prep.cross(g, k) + plus`` for every class ``g``, built from the
    few classes the mask is local to rather than one test per class."""
    template = [big if has_rack else 0 for has_rack, _ in prep.classes]
    local = _local_classes(prep)

    def row(k: int, plus: int) -> list[int]:
        if not k:
            return [plus] * len(template)
        out = [w + plus for w in template] if plus else list(template)
        for g in local(k):
            out[g] = plus
        return out

    return row


def _fan_out(graph: FlowGraph, tail: int, heads: list[int], capacity: int, costs: list[int]) -> list[int]:
    """``graph.add_edge(tail, heads[g], capacity, costs[g])`` for every ``g`` in order, appended in
    one go; their edge numbers."""
    start = len(graph.edges)
    graph.edges.extend(zip([tail] * len(heads), heads, [capacity] * len(heads), costs, strict=True))
    return list(range(start, len(graph.edges)))


def keeps_itself(prep: Prepared, holder: list[int]) -> bool:
    """Whether :func:`assign_constrained`, every member owning what ``holder`` gives it, returns ``holder``:
    proven here without running it.

    True when ``holder`` gives every partition to a member, ``q`` or ``q + 1`` to each, and is as local
    as any such assignment (:func:`fewest_cross`).  Then keeping everything is in Kafka's region (it
    keeps every owned partition), costs ``BIG * fewest`` and no move, and every other assignment with
    these counts costs at least one move more: the flow's optimum is unique, and its write-back gives
    each member exactly what it owns (no free partition, members of a profile alike).  Settling asks
    this before simulating that round (:func:`rackplan.assignor.consumer.sticky.settling.settle`),
    which otherwise costs as much as the round itself.
    """
    n = len(prep.member_ids)
    q = prep.num_partitions // n
    count = [0] * n
    for h in holder:
        if h < 0:
            return False
        count[h] += 1
    if any(c != q and c != q + 1 for c in count):
        return False
    have = cross_count(prep, holder)
    return have == 0 or have == fewest_cross(prep)
