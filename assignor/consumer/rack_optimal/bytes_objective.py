"""``objective: bytes`` with count balance: the fewest cross-rack bytes/s, then the fewest moves.

Over the fair assignments (every member of subscription class ``s`` holds
``low[s]`` or ``low[s] + 1``, the box of :mod:`.fair`; with equal
subscriptions these are *all* the balanced assignments) this is a
transportation problem, solved exactly as one min-cost flow on the classes of
:func:`rackplan.assignor.consumer.rack_optimal.classify`:

* Partitions of one class ``k`` (same topic group, same replica racks) are
  local to the same member racks, so only *how many* of them cross matters,
  and the lightest ones should.  Class ``k`` sends its unowned partitions to
  its local group-rack nodes at cost 0, and to the cross-rack ones through a
  hub reached by one unit arc per partition, costing its bytes/s: the flow
  takes the cheapest arcs first, so crossing costs the ``m`` lightest
  partitions' bytes (a convex cost, exact on a flow).
* An owned partition (its owner still subscribes) is its own node, with an arc
  straight to its owner (cost: its bytes if cross-rack there) and arcs to the
  group-rack nodes costing one more (a move).  Bytes are scaled by ``C`` = owned
  partitions + 1, so bytes come first and moves second.
* Members holding ``low + 1`` cost ``W * (2 low + 1)`` each, ``W`` above every
  other cost: fairness first (the minimal sum of squared counts), as in stage A.

Bytes are exact integers in one scale (:func:`rackplan.assignor.traffic.exact_integers`),
unknown traffic weighs the mean of the known.  With equal subscriptions the
plan is optimal over every balanced assignment (``optimal: true``).  With
unequal ones a less even balanced assignment may cross fewer bytes (or move
fewer partitions), so the fair plan goes on to
:func:`rackplan.assignor.consumer.rack_optimal.balanced.rebalance` with byte
costs: proven when it reaches the per-partition floor or when HiGHS decides
the program (only while the scaled bytes fit its exact range), else
``optimal: false`` with ``cross_rack_bytes_lower_bound``.  The write-back is
checked (every partition once, to a subscriber, counts in the fair box).
"""

from __future__ import annotations

from ...flow import FlowGraph, PostconditionError
from ...model import Cluster, ConsumerGroup, ConsumerPlan, TopicPartition, is_cross_rack
from ...traffic import exact_integers, group_weights, scaled_down
from .balanced import rebalance
from .class_flow import Classes, classify, hand_out, owned_by_class, pour


def assign_bytes(cluster: Cluster, group: ConsumerGroup) -> ConsumerPlan:
    """The plan of the module docstring and its ``stats`` (``optimal``, else the proven bound)."""
    if not group.members:
        return ConsumerPlan(assignment={}, revoked={}, stats={"optimal": True})
    c = classify(cluster, group)
    owned = owned_by_class(cluster, group, c)
    topics = sorted({t for m in c.members for t in m.topics})
    values = group_weights(cluster, topics)
    flat = [(t, p) for t in topics for p in range(len(cluster.topics[t]))]
    scaled, scale = exact_integers([values[t][p] for t, p in flat])
    b = dict(zip(flat, scaled, strict=True))

    owner_of: dict[TopicPartition, int] = {
        tp: i for i, mine in enumerate(owned) for ps in mine.values() for tp in ps
    }
    big_c = len(owner_of) + 1
    big_w = big_c * (sum(scaled) + 1)
    n_k, n_gr, n_q = len(c.k_keys), len(c.gr_keys), len(c.q_keys)
    sticky = sorted({i for i in owner_of.values()})
    node_of_member = {i: j for j, i in enumerate(sticky)}
    # nodes: classes, hubs, group-racks, member classes, sticky members, x, then owned partitions
    hub0, gr0, q0 = n_k, 2 * n_k, 2 * n_k + n_gr
    m0 = q0 + n_q
    x = m0 + len(sticky)
    owned_parts = sorted(owner_of)
    p0 = x + 1
    graph = FlowGraph(p0 + len(owned_parts))
    supply = graph.supply

    pooled: list[list[TopicPartition]] = []  # per class, its unowned partitions, lightest first
    k_local: list[list[tuple[int, int]]] = []  # per class: (group-rack j, edge)
    k_cross: list[list[tuple[int, int]]] = []
    for k, (g, mask) in enumerate(c.k_keys):
        parts = sorted((tp for tp in c.k_parts[k] if tp not in owner_of), key=lambda tp: (b[tp], tp))
        pooled.append(parts)
        supply[k] = len(parts)
        local, cross = [], []
        for rc in range(len(c.rc_keys)):
            j = c.gr_index.get((g, rc))
            if j is None:
                continue
            if c.cross(rc, mask):
                cross.append((j, graph.add_edge(hub0 + k, gr0 + j, len(parts), 0)))
            else:
                local.append((j, graph.add_edge(k, gr0 + j, len(parts), 0)))
        if cross:
            for tp in parts:
                graph.add_edge(k, hub0 + k, 1, big_c * b[tp])
        k_local.append(local)
        k_cross.append(cross)

    owned_edges: list[tuple[TopicPartition, int, list[tuple[int, int]]]] = []
    for n, tp in enumerate(owned_parts, start=p0):
        supply[n] = 1
        i = owner_of[tp]
        k = c.k_of[tp[0]][tp[1]]
        g, mask = c.k_keys[k]
        keep = graph.add_edge(n, m0 + node_of_member[i], 1, big_c * b[tp] * c.cross(c.member_rc[i], mask))
        away = []
        for rc in range(len(c.rc_keys)):
            j = c.gr_index.get((g, rc))
            if j is not None:
                away.append((j, graph.add_edge(n, gr0 + j, 1, big_c * b[tp] * c.cross(rc, mask) + 1)))
        owned_edges.append((tp, keep, away))

    q_of = {key: q for q, key in enumerate(c.q_keys)}
    gq: list[tuple[int, int, int]] = []
    for j, (grp, rc) in enumerate(c.gr_keys):
        for s in c.group_subs[grp]:
            q = q_of.get((rc, s))
            if q is not None:
                gq.append((j, q, graph.add_edge(gr0 + j, q0 + q, c.group_sizes[grp], 0)))
    qm: list[tuple[int, int]] = []
    is_sticky = set(sticky)
    for i in sticky:
        s, q = c.member_sub[i], c.member_q[i]
        qm.append((i, graph.add_edge(q0 + q, m0 + node_of_member[i], c.low[s] + c.extra[s], 0)))
        supply[m0 + node_of_member[i]] = -c.low[s]
        if c.extra[s]:
            graph.add_edge(m0 + node_of_member[i], x, 1, big_w * (2 * c.low[s] + 1))
    rest = [[i for i in ms if i not in is_sticky] for ms in c.q_members]
    qx: dict[int, int] = {}
    for q, ms in enumerate(rest):
        s = c.q_keys[q][1]
        supply[q0 + q] = -len(ms) * c.low[s]
        if c.extra[s] and ms:
            qx[q] = graph.add_edge(q0 + q, x, len(ms), big_w * (2 * c.low[s] + 1))
    supply[x] = -sum(supply)  # what the members hold above low
    flow = graph.solve().flow

    # Write back: the lightest partitions of a class are the ones that cross.
    gr_pool: list[list[TopicPartition]] = [[] for _ in range(n_gr)]
    for k, parts in enumerate(pooled):
        n_cross = sum(flow[e] for _, e in k_cross[k])
        crossing, staying = parts[:n_cross], parts[n_cross:]
        for pool, arcs in ((staying, k_local[k]), (crossing, k_cross[k])):
            at = 0
            for j, e in arcs:
                gr_pool[j].extend(pool[at : at + flow[e]])
                at += flow[e]
            if at != len(pool):
                raise PostconditionError(f"class {k}: the flow does not account for every partition")
    out: list[list[TopicPartition]] = [[] for _ in c.members]
    for tp, keep, away in owned_edges:
        if flow[keep]:
            out[owner_of[tp]].append(tp)
        for j, e in away:
            if flow[e]:
                gr_pool[j].append(tp)
    q_pool = pour(gr_pool, [(j, q, flow[e]) for j, q, e in gq], n_q)
    hand_out(
        c,
        q_pool,
        [(i, flow[e]) for i, e in qm],
        rest,
        {q: flow[e] for q, e in qx.items()},
        [c.low[c.member_sub[i]] for i in range(len(c.members))],
        out,
    )
    return _checked(cluster, group, c, out, b, scale)


def _checked(
    cluster: Cluster,
    group: ConsumerGroup,
    c: Classes,
    out: list[list[TopicPartition]],
    b: dict[TopicPartition, int],
    scale: int,
) -> ConsumerPlan:
    """Postconditions (every partition once, to a subscriber, counts in the fair box) and the stats."""
    seen: set[TopicPartition] = set()
    cross = 0
    masks = cluster.masks
    for i, parts in enumerate(out):
        m = c.members[i]
        s = c.member_sub[i]
        if not c.low[s] <= len(parts) <= c.low[s] + c.extra[s]:
            raise PostconditionError(
                f"member {m.member_id} holds {len(parts)} partitions, outside the fair box"
            )
        bit = cluster.member_bit(m.rack)
        for tp in parts:
            if tp in seen or tp[0] not in m.topics:
                raise PostconditionError(f"partition {tp} assigned twice or to a member not subscribed")
            seen.add(tp)
            if is_cross_rack(m.rack, bit, masks[tp[0]][tp[1]]):
                cross += b[tp]
    if len(seen) != len(b):
        raise PostconditionError(f"{len(b) - len(seen)} partitions left unassigned")
    assignment = {m.member_id: sorted(parts) for m, parts in zip(c.members, out, strict=True)}
    if len(c.low) == 1:  # equal subscriptions: the fair assignments are all the balanced ones
        return ConsumerPlan(assignment=assignment, revoked={}, stats={"optimal": True})
    # Unequal: from the fair optimum to the balanced one, as for partitions, with byte costs (its
    # floor counts moves too: reaching the bytes bound alone does not prove the fewest moves).
    better, outcome = rebalance(cluster, group, assignment, values=b)
    stats: dict[str, bool | int | float] = {"optimal": outcome.optimal}
    if not outcome.optimal:
        stats["cross_rack_bytes_lower_bound"] = scaled_down(outcome.cross_rack_lower_bound, scale)
    return ConsumerPlan(assignment=better, revoked={}, stats=stats)
