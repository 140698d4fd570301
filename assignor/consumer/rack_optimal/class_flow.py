"""rack-optimal's fair optimum: stages A and B, two min-cost flows over classes of members and partitions.

Partitions with the same topic group (topics subscribed by the same member
classes) and the same replica-rack mask are interchangeable; so are
members with the same rack (for cost) and the same subscription (for
balance).  Inside the fair box every member holds ``low`` or ``low + 1``
partitions, and the sum of squares is linear in the number of members at
``low + 1``.  Stage A solves one min-cost flow over those classes (small
nodes), costing ``W * (2 low + 1)`` per member at ``low + 1`` with ``W``
larger than any cross-rack total, plus 1 per cross-rack partition.  Its
optimal dual prices describe every optimal class-level flow: arcs of positive
reduced cost are unusable, negative ones must be full.  Stage B solves, on
exactly that face, a flow with one node per member that owned something: a
partition kept by its owner costs 0, any other costs 1.  Owned partitions of
one class are interchangeable for their owner, so a member needs one arc per
class it owned partitions of, and the member that keeps ``k`` of them keeps
``k`` of its own.  Not cooperative: ``revoked`` is always empty.

Both stages build a :class:`rackplan.assignor.flow.FlowGraph` solved by :func:`rackplan.assignor.flow.min_cost_flow_phases` (primal-dual with
blocking flows, exact like :func:`rackplan.assignor.flow.min_cost_flow`): stage B has
one node per sticky member and thousands of distinct augmenting paths, and
even stage A, for a thousand members with distinct subscriptions, ran 25 times
slower with one path per Dijkstra run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...flow import FlowGraph
from ...flow.prices import residual_potentials
from ...model import Cluster, ConsumerGroup, ConsumerPlan, Member, TopicPartition
from ...record import record
from ..owned import previous_owners
from .fair import fair_box


def fair_assign(cluster: Cluster, group: ConsumerGroup) -> ConsumerPlan:
    """Stages A and B alone: the optimum over the fair assignments (all balanced ones when subscriptions are equal)."""
    if not group.members:
        return ConsumerPlan(assignment={}, revoked={})
    c = classify(cluster, group)
    face = _optimal_face(c)
    owned = owned_by_class(cluster, group, c)
    parts = _keep_most(c, face, owned)
    return ConsumerPlan(
        assignment={m.member_id: sorted(parts[i]) for i, m in enumerate(c.members)}, revoked={}
    )


@record()
class Classes:
    """The instance aggregated: what is interchangeable for cost and for balance.

    Members (sorted by id) fall into subscription classes ``s``, rack classes
    ``rc`` (same cross-rack cost everywhere) and member classes ``q = (rc, s)``.
    Partitions fall into classes ``k = (topic group g, replica-rack mask)``.
    Nodes of both flow graphs: partition classes, then group-rack nodes
    ``(g, rc)`` (where a cross-rack cost is paid), then member classes, then
    the node ``x`` that collects the units members hold above ``low`` (stage A
    adds one cross-rack hub per topic group after it: :func:`_optimal_face`).
    """

    members: list[Member]
    member_sub: list[int]
    member_rc: list[int]
    member_q: list[int]
    rc_keys: list[tuple[bool, int]]  # (has a rack, its mask bit)
    group_subs: list[tuple[int, ...]]
    group_sizes: list[int]
    total: int
    low: list[int]  # per subscription class: the fair box
    extra: list[bool]
    k_keys: list[tuple[int, int]]
    k_parts: list[list[TopicPartition]]  # sorted
    k_of: dict[str, list[int]]  # partition class of each partition
    q_keys: list[tuple[int, int]]
    q_members: list[list[int]]
    gr_keys: list[tuple[int, int]]
    gr_index: dict[tuple[int, int], int]

    @property
    def gr_base(self) -> int:
        return len(self.k_keys)

    @property
    def q_base(self) -> int:
        return len(self.k_keys) + len(self.gr_keys)

    @property
    def x_node(self) -> int:
        return self.q_base + len(self.q_keys)

    def cross(self, rc: int, mask: int) -> int:
        has_rack, bit = self.rc_keys[rc]
        return 1 if has_rack and mask and not mask & bit else 0


@record()
class _Face:
    """What every optimal stage-A flow looks like (complementary slackness).

    ``kg`` and ``gq`` list the class arcs of reduced cost zero, the only ones an
    optimal flow may use; a member class is ``forced`` to put every member at
    ``low + 1``, or ``free`` to choose how many, or neither (all at ``low``).
    """

    kg: list[tuple[int, int]]
    gq: list[tuple[int, int]]
    forced: list[bool]
    free: list[bool]


def classify(cluster: Cluster, group: ConsumerGroup) -> Classes:
    members = sorted(group.members, key=lambda m: m.member_id)
    n_mem = len(members)
    sub_index: dict[tuple[str, ...], int] = {}
    member_sub = [sub_index.setdefault(m.topics, len(sub_index)) for m in members]
    sizes = [0] * len(sub_index)
    for s in member_sub:
        sizes[s] += 1
    topic_subs: dict[str, list[int]] = {}
    for s, topics in enumerate(sub_index):
        for t in topics:
            topic_subs.setdefault(t, []).append(s)
    group_index: dict[tuple[int, ...], int] = {}
    topic_group: dict[str, int] = {}
    for t in sorted(topic_subs):
        topic_group[t] = group_index.setdefault(tuple(topic_subs[t]), len(group_index))
    group_subs = list(group_index)
    group_sizes = [0] * len(group_subs)
    for t, g in topic_group.items():
        group_sizes[g] += len(cluster.topics[t])
    total = sum(group_sizes)

    rc_index: dict[tuple[bool, int], int] = {}
    member_rc = [
        rc_index.setdefault((m.rack is not None, cluster.member_bit(m.rack)), len(rc_index)) for m in members
    ]
    if len(sizes) == 1:
        low, extra = [total // n_mem], [total % n_mem != 0]
    else:
        low, extra = fair_box(sizes, group_sizes, [list(s) for s in group_subs])

    k_index: dict[tuple[int, int], int] = {}
    k_parts: list[list[TopicPartition]] = []
    k_of: dict[str, list[int]] = {}
    for t, g in topic_group.items():  # sorted by topic, so every k_parts list is sorted
        row: list[int] = []
        local: dict[int, int] = {}
        for p, mask in enumerate(cluster.masks[t]):
            k = local.get(mask)
            if k is None:
                k = k_index.get((g, mask))
                if k is None:
                    k = k_index[(g, mask)] = len(k_parts)
                    k_parts.append([])
                local[mask] = k
            k_parts[k].append((t, p))
            row.append(k)
        k_of[t] = row

    q_index: dict[tuple[int, int], int] = {}
    member_q = [q_index.setdefault((member_rc[i], member_sub[i]), len(q_index)) for i in range(n_mem)]
    q_members: list[list[int]] = [[] for _ in q_index]
    for i, q in enumerate(member_q):
        q_members[q].append(i)
    sub_groups: list[list[int]] = [[] for _ in sub_index]
    for g, subs in enumerate(group_subs):
        for s in subs:
            sub_groups[s].append(g)
    gr_keys = sorted({(g, rc) for rc, s in q_index for g in sub_groups[s]})
    return Classes(
        members=members,
        member_sub=member_sub,
        member_rc=member_rc,
        member_q=member_q,
        rc_keys=list(rc_index),
        group_subs=group_subs,
        group_sizes=group_sizes,
        total=total,
        low=low,
        extra=extra,
        k_keys=list(k_index),
        k_parts=k_parts,
        k_of=k_of,
        q_keys=list(q_index),
        q_members=q_members,
        gr_keys=gr_keys,
        gr_index={key: j for j, key in enumerate(gr_keys)},
    )


def _optimal_face(c: Classes) -> _Face:
    """Stage A: the class-level min-cost flow (fairness, then cross-rack) and its optimal face.

    Cross-rack supply goes through one hub node per topic group (``k -> hub``
    costs 1, ``hub -> (g, rc)`` 0); only rack-matching group-rack nodes (at
    most a replication factor of them, plus rack-less classes) get a direct
    arc of cost 0.  That flow has the optimum of the flow with one arc per
    (partition class, group-rack node), and the greatest optimal prices
    ``<= 0`` (what :func:`residual_potentials` returns, whichever optimal flow
    it is given) agree on every node the two graphs share, so the face read
    back from them, arc by class arc, is the same: the graph stays
    ``O(classes x RF + group-rack nodes)`` whatever the number of racks.
    """
    weight = c.total + 1  # more than any cross-rack total: fairness comes first
    hub_base = c.x_node + 1
    graph = FlowGraph(hub_base + len(c.group_sizes))
    racked, direct = _class_targets(c)
    for k, (g, mask) in enumerate(c.k_keys):
        # Capacities never bind (one more than can ever flow), so only the
        # sign of an arc's reduced cost says whether optimal flows use it.
        cap = len(c.k_parts[k]) + 1
        if mask and racked[g]:
            graph.add_edge(k, hub_base + g, cap, 1)
        for j in direct(g, mask):
            graph.add_edge(k, c.gr_base + j, cap, 0)
    for g, js in enumerate(racked):
        for j in js:
            graph.add_edge(hub_base + g, c.gr_base + j, c.group_sizes[g] + 1, 0)
    gq: dict[tuple[int, int], int] = {}
    q_of = {key: q for q, key in enumerate(c.q_keys)}
    for j, (grp, rc) in enumerate(c.gr_keys):
        for s in c.group_subs[grp]:
            q = q_of.get((rc, s))
            if q is not None:
                gq[(j, q)] = graph.add_edge(c.gr_base + j, c.q_base + q, c.group_sizes[grp] + 1, 0)
    qx: dict[int, int] = {}
    for q, (_, s) in enumerate(c.q_keys):
        if c.extra[s]:
            qx[q] = graph.add_edge(c.q_base + q, c.x_node, len(c.q_members[q]), weight * (2 * c.low[s] + 1))
    supply = graph.supply
    for k, parts in enumerate(c.k_parts):
        supply[k] = len(parts)
    for q, (_, s) in enumerate(c.q_keys):
        supply[c.q_base + q] = -len(c.q_members[q]) * c.low[s]
    supply[c.x_node] = -c.total - sum(supply[c.q_base : c.x_node])
    flow = graph.solve().flow
    edges = graph.edges
    pot = residual_potentials(graph.num_nodes, edges, flow)

    def reduced(e: int) -> int:
        u, v, _, w = edges[e]
        return w + pot[u] - pot[v]

    return _Face(
        kg=_face_kg(c, pot, racked, direct),
        gq=sorted(key for key, e in gq.items() if reduced(e) == 0),
        forced=[q in qx and reduced(qx[q]) < 0 for q in range(len(c.q_keys))],
        free=[q in qx and reduced(qx[q]) == 0 for q in range(len(c.q_keys))],
    )


def _class_targets(c: Classes) -> tuple[list[list[int]], Callable[[int, int], list[int]]]:
    """Per topic group its group-rack nodes of members with a rack (the hub's heads), and the
    group-rack nodes a partition class of mask ``mask`` in group ``g`` reaches at no cross-rack
    cost: those of its replicas' racks and of rack-less members, or all of them when the mask is 0."""
    racked: list[list[int]] = [[] for _ in c.group_sizes]
    rackless: list[list[int]] = [[] for _ in c.group_sizes]
    everyone: list[list[int]] = [[] for _ in c.group_sizes]
    by_bit: dict[tuple[int, int], int] = {}
    for j, (g, rc) in enumerate(c.gr_keys):  # sorted: every list is sorted
        has_rack, bit = c.rc_keys[rc]
        everyone[g].append(j)
        if has_rack:
            racked[g].append(j)
            if bit:
                by_bit[(g, bit)] = j
        else:
            rackless[g].append(j)

    def direct(g: int, mask: int) -> list[int]:
        if not mask:
            return everyone[g]
        out = list(rackless[g])
        m = mask
        while m:
            low = m & -m
            m ^= low
            j = by_bit.get((g, low))
            if j is not None:
                out.append(j)
        out.sort()
        return out

    return racked, direct


def _face_kg(
    c: Classes, pot: list[int], racked: list[list[int]], direct: Callable[[int, int], list[int]]
) -> list[tuple[int, int]]:
    """The class arcs ``(k, (g, rc))`` of reduced cost zero under ``pot``, sorted, without
    enumerating the others: a cross-rack one costs 1, so its head's price is ``pot[k] + 1``."""
    by_price: list[dict[int, list[int]]] = [{} for _ in racked]
    for g, js in enumerate(racked):
        for j in js:
            by_price[g].setdefault(pot[c.gr_base + j], []).append(j)
    kg: list[tuple[int, int]] = []
    for k, (g, mask) in enumerate(c.k_keys):
        pk = pot[k]
        near = direct(g, mask)
        js = [j for j in near if pot[c.gr_base + j] == pk]
        if mask:
            local = set(near)
            js.extend(j for j in by_price[g].get(pk + 1, ()) if j not in local)
            js.sort()
        kg.extend((k, j) for j in js)
    return kg


def owned_by_class(
    cluster: Cluster, group: ConsumerGroup, c: Classes
) -> list[dict[int, list[TopicPartition]]]:
    """Per member and partition class, the owned partitions that count for stickiness (sorted).

    Valid claims (:func:`rackplan.assignor.consumer.owned.previous_owners`) whose owner still
    subscribes to the topic.
    """
    index_of = {m.member_id: i for i, m in enumerate(c.members)}
    subscribed = [frozenset(m.topics) for m in c.members]
    owned: list[dict[int, list[TopicPartition]]] = [{} for _ in c.members]
    for tp, mid in previous_owners(cluster, group).items():
        i = index_of[mid]
        if tp[0] in subscribed[i]:
            owned[i].setdefault(c.k_of[tp[0]][tp[1]], []).append(tp)
    for mine in owned:
        for parts in mine.values():
            parts.sort()
    return owned


def _keep_most(
    c: Classes, face: _Face, owned: list[dict[int, list[TopicPartition]]]
) -> list[list[TopicPartition]]:
    """Stage B: on the optimal face, keep the most owned partitions; then hand out partitions.

    Only members with an owned partition they may keep get a node; the others
    of a member class are served in bulk by the class node.
    """
    n_mem = len(c.members)
    base = [c.low[c.member_sub[i]] + face.forced[c.member_q[i]] for i in range(n_mem)]
    room = [base[i] + face.free[c.member_q[i]] for i in range(n_mem)]
    kg_ok, gq_ok = set(face.kg), set(face.gq)
    keep_arcs: list[list[tuple[int, int]]] = [[] for _ in range(n_mem)]  # (class k, capacity)
    for i in range(n_mem):
        rc, q = c.member_rc[i], c.member_q[i]
        for k in sorted(owned[i]):
            j = c.gr_index[(c.k_keys[k][0], rc)]
            if (k, j) in kg_ok and (j, q) in gq_ok:
                keep_arcs[i].append((k, min(len(owned[i][k]), room[i])))
    sticky = [i for i in range(n_mem) if keep_arcs[i]]
    is_sticky = [False] * n_mem
    for i in sticky:
        is_sticky[i] = True
    rest = [[i for i in members if not is_sticky[i]] for members in c.q_members]

    graph = FlowGraph(c.x_node + 1 + len(sticky))
    supply = graph.supply
    for k, parts in enumerate(c.k_parts):
        supply[k] = len(parts)
    kg_start, gr_base = len(graph.edges), c.gr_base  # every partition not kept by its owner costs 1:
    graph.edges.extend((k, gr_base + j, len(c.k_parts[k]) + 1, 1) for k, j in face.kg)  # keeps the most
    gq_edge = []
    for j, q in face.gq:
        gq_edge.append(
            (j, q, graph.add_edge(c.gr_base + j, c.q_base + q, c.group_sizes[c.gr_keys[j][0]] + 1, 0))
        )
    keep_edge: list[tuple[int, int, int]] = []  # (member, class k, edge)
    qm_edge: list[tuple[int, int]] = []  # (member, edge)
    for node, i in enumerate(sticky, start=c.x_node + 1):
        q = c.member_q[i]
        qm_edge.append((i, graph.add_edge(c.q_base + q, node, room[i], 0)))
        for k, cap in keep_arcs[i]:
            keep_edge.append((i, k, graph.add_edge(k, node, cap, 0)))
        if face.free[q]:
            graph.add_edge(node, c.x_node, 1, 0)
        supply[node] = -base[i]
    qx_edge: dict[int, int] = {}
    for q, members in enumerate(rest):
        supply[c.q_base + q] = -sum(base[i] for i in members)
        if face.free[q] and members:
            qx_edge[q] = graph.add_edge(c.q_base + q, c.x_node, len(members), 0)
    supply[c.x_node] = sum(base) - c.total
    flow = graph.solve().flow

    # Kept partitions first; the rest of each class travels through the pools.
    out: list[list[TopicPartition]] = [[] for _ in range(n_mem)]
    taken: set[TopicPartition] = set()
    for i, k, e in keep_edge:
        mine = owned[i][k][: flow[e]]
        out[i].extend(mine)
        taken.update(mine)
    k_pool = [[tp for tp in parts if tp not in taken] for parts in c.k_parts] if taken else c.k_parts
    kg_flow = flow[kg_start : kg_start + len(face.kg)]  # zero moves move nothing: skipped
    gr_pool = pour(k_pool, [(*a, f) for a, f in zip(face.kg, kg_flow, strict=True) if f], len(c.gr_keys))
    q_pool = pour(gr_pool, [(j, q, flow[e]) for j, q, e in gq_edge], len(c.q_keys))
    hand_out(
        c,
        q_pool,
        [(i, flow[e]) for i, e in qm_edge],
        rest,
        {q: flow[e] for q, e in qx_edge.items()},
        base,
        out,
    )
    return out


def hand_out(
    c: Classes,
    q_pool: list[list[TopicPartition]],
    sticky: list[tuple[int, int]],
    rest: list[list[int]],
    extras: dict[int, int],
    base: Sequence[int],
    out: list[list[TopicPartition]],
) -> None:
    """Member classes' pools to members: ``(member, amount)`` for members with their own node, then the
    rest of each class in order, ``base[i]`` each and one more for the first ``extras[q]``."""
    q_ptr = [0] * len(c.q_keys)
    for i, amount in sticky:
        q = c.member_q[i]
        out[i].extend(q_pool[q][q_ptr[q] : q_ptr[q] + amount])
        q_ptr[q] += amount
    for q, members in enumerate(rest):
        more = extras.get(q, 0)
        for rank, i in enumerate(members):
            f = base[i] + (rank < more)
            out[i].extend(q_pool[q][q_ptr[q] : q_ptr[q] + f])
            q_ptr[q] += f
    if q_ptr != [len(p) for p in q_pool]:
        raise AssertionError("class flows do not account for every partition")


def pour(
    pools: list[list[TopicPartition]], moves: list[tuple[int, int, int]], n_out: int
) -> list[list[TopicPartition]]:
    """Move ``amount`` partitions from ``pools[src]`` to new pool ``dst`` for each (src, dst, amount), in order."""
    out: list[list[TopicPartition]] = [[] for _ in range(n_out)]
    ptr = [0] * len(pools)
    for src, dst, amount in moves:
        out[dst].extend(pools[src][ptr[src] : ptr[src] + amount])
        ptr[src] += amount
    if ptr != [len(p) for p in pools]:
        raise AssertionError("class flows do not account for every partition")
    return out
