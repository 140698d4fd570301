"""Rack-aware optimisation of a Streams assignment (KIP-925), on aggregated flow graphs.

Kafka builds one edge per (task, client) pair and cancels cycles.  Here a
task's traffic cost depends only on its client's *rack*, so tasks with one
cost profile share a class node that reaches one node per rack (per rack and
sub-topology for ``balance_subtopology``); a task reaches the clients that
cost it no move (the baseline owner, optionally previous owners) through one
direct edge each, and tasks with the same profile and the same such clients
share one node.  Client loads are those of the baseline, as in Kafka.

Two graphs.  The *full* one sends each (rack, sub-topology) node to each
client of the rack through the client's cap for that sub-topology; its
optimum is that of Kafka's graph (any solution of one maps to a solution of
the other at the same cost).  The *pooled* one drops the per-client caps:
the rack's (rack, sub-topology) nodes feed one pool node per rack, which
feeds the rack's clients, so clients x sub-topologies edges become clients
+ sub-topologies.  That is a relaxation, so its optimum is a lower bound;
its arrivals are then placed on clients under the caps (a bipartite
b-matching), and when they fit the bound is reached, so the placement is
optimal.  When they do not fit, the full graph is solved.  ``min_traffic``
has no per-sub-topology caps: there the pooled graph is exact.

When moving is free (no non-overlap cost, Kafka's weights for stateless
tasks), ties are broken towards staying: among the cheapest placements, one
with the fewest moves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from ..flow import FlowGraph, InfeasibleFlow, PostconditionError
from ..model import StreamsApp
from .tasks import State, TaskModel


def disabled_reason(model: TaskModel, app: StreamsApp) -> str | None:
    """Why rack optimisation is off for this app, or None when it runs.

    Unlike Kafka, rack-less *brokers* do not switch it off: their replicas
    count as unknown (never cross-rack) and every other partition is optimised.
    """
    if app.rack_aware.strategy == "none":
        return "rack.aware.assignment.strategy is none"
    for c in model.clients:
        if c.rack is None:
            return f"client {c.process_id} has no rack"
    return None


def task_cost(model: TaskModel, t: int, c: int, traffic: int, non_overlap: int, free: Sequence[int]) -> int:
    """KIP-925 cost of active task ``t`` on client ``c``; ``free`` are the clients it may stay on."""
    unit = model.move_unit
    return traffic * model.active_cost[t][model.group_of[c]] + (0 if c in free else non_overlap * unit)


def subtopology_caps(
    model: TaskModel, counts: Sequence[int], tasks: Sequence[int]
) -> dict[tuple[int, int], int]:
    """``balance_subtopology``: client ``i`` takes at most ceil(count_i * S_j / n) tasks of sub-topology ``j``."""
    n = len(tasks)
    per_sub: dict[int, int] = {}
    for t in tasks:
        per_sub[model.sub_of[t]] = per_sub.get(model.sub_of[t], 0) + 1
    return {
        (i, j): (counts[i] * s + n - 1) // n
        for i in range(model.num_clients)
        if counts[i]
        for j, s in sorted(per_sub.items())
    }


class _Problem:
    """One rack optimisation, indexed: task nodes (interchangeable tasks), classes, racks, caps."""

    def __init__(
        self,
        model: TaskModel,
        tasks: Sequence[int],
        owner: dict[int, int],
        balance: bool,
        traffic: int,
        non_overlap: int,
        previous: Sequence[Sequence[int]] | None,
        vectors: dict[int, tuple[int, ...]],
        groups: list[int],
    ) -> None:
        self.groups = groups
        self.group_of = model.group_of
        self.traffic = traffic
        self.non_overlap = non_overlap
        self.balance = balance
        self.counts = counts = [0] * model.num_clients
        for t in tasks:
            counts[owner[t]] += 1
        self.clients = [i for i in range(model.num_clients) if counts[i]]
        self.racks = sorted({model.group_of[i] for i in self.clients})
        sub_of = model.sub_of
        per_bucket: dict[int, int] = {}
        for t in tasks:
            j = sub_of[t] if balance else 0
            per_bucket[j] = per_bucket.get(j, 0) + 1
        self.buckets = sorted(per_bucket)
        self.per_bucket = per_bucket
        self.n_tasks = len(tasks)
        self._caps: dict[int, list[int]] = {}
        # Tasks with one cost profile and the same free clients are interchangeable: one node for them.
        # With no non-overlap cost a free edge costs what the class path costs, so none are built.
        class_of: dict[tuple[int, tuple[int, ...]], int] = {}
        nodes: dict[tuple[int, tuple[int, ...]], list[int]] = {}
        for t in tasks:
            cid = class_of.setdefault((sub_of[t] if balance else 0, vectors[t]), len(class_of))
            fr = _free_clients(owner[t], previous[t] if previous else (), counts) if non_overlap else ()
            nodes.setdefault((cid, fr), []).append(t)
        self.class_keys = list(class_of)
        self.class_size = [0] * len(class_of)
        for (cid, _fr), members in nodes.items():
            self.class_size[cid] += len(members)
        self.nodes = [(cid, fr, members) for (cid, fr), members in nodes.items()]

    def caps(self, i: int) -> list[int]:
        """Client ``i``'s cap per bucket (in ``buckets`` order): ceil(count_i * S_j / n), or its count."""
        k = self.counts[i]
        row = self._caps.get(k)
        if row is None:
            n = self.n_tasks
            row = [(k * self.per_bucket[j] + n - 1) // n if self.balance else k for j in self.buckets]
            self._caps[k] = row
        return row


class _Placement:
    """A flow read back as quotas: free-edge units per task node, then class -> rack -> client."""

    __slots__ = ("client_quota", "free", "rack_quota")

    def __init__(self, p: _Problem) -> None:
        self.free: list[list[tuple[int, int]]] = [[] for _ in p.nodes]
        self.rack_quota: list[dict[int, int]] = [{} for _ in p.class_keys]
        self.client_quota: dict[tuple[int, int], dict[int, int]] = {}


def _front(
    p: _Problem, direct_target: Callable[[int, int], int], gj_node: dict[tuple[int, int], int], n_nodes: int
) -> tuple[FlowGraph, list[tuple[int, int]]]:
    """Edges from task nodes (to their class and free clients) and from classes to (rack, bucket) nodes.

    Task node ``k`` is node ``k``; class ``c`` is node ``len(p.nodes) + c``.
    Returns the graph (supplies: tasks only so far) and, per class edge, its (class, rack).
    """
    graph = FlowGraph(n_nodes)
    supply, edge = graph.supply, graph.add_edge
    class_base = len(p.nodes)
    rack_index = {g: gi for gi, g in enumerate(p.groups)}
    traffic = p.traffic
    for node, (cid, fr, members) in enumerate(p.nodes):
        m = len(members)
        supply[node] = m
        edge(node, class_base + cid, m, 0)
        j, vec = p.class_keys[cid]
        for c in fr:
            edge(node, direct_target(c, j), m, traffic * vec[rack_index[p.group_of[c]]])
    class_targets: list[tuple[int, int]] = []
    for cid, (j, vec) in enumerate(p.class_keys):
        for gi, g in enumerate(p.groups):
            target = gj_node.get((g, j))
            if target is not None:
                class_targets.append((cid, g))
                edge(class_base + cid, target, p.class_size[cid], traffic * vec[gi] + p.non_overlap)
    return graph, class_targets


def _read_front(p: _Problem, flow: list[int], class_targets: list[tuple[int, int]], out: _Placement) -> None:
    """Fill the free-edge units and rack quotas of ``out`` from the edges :func:`_front` built."""
    e = 0
    for node, (_cid, fr, _members) in enumerate(p.nodes):
        e += 1
        for c in fr:
            if flow[e]:
                out.free[node].append((c, flow[e]))
            e += 1
    for cid, g in class_targets:
        if flow[e]:
            out.rack_quota[cid][g] = flow[e]
        e += 1


def _client_bucket_nodes(
    p: _Problem, nxt: int, only_overfull: bool
) -> tuple[dict[tuple[int, int], int], int]:
    """Nodes (numbered from ``nxt``) for the (client, bucket) pairs that free edges enter and whose cap binds.

    With ``only_overfull``, only pairs whose free edges could carry more than
    the cap (the caller checks the rest itself).
    """
    entering: dict[tuple[int, int], int] = {}
    for cid, fr, members in p.nodes:
        j = p.class_keys[cid][0]
        for c in fr:
            entering[(c, j)] = entering.get((c, j), 0) + len(members)
    cj_node: dict[tuple[int, int], int] = {}
    bucket_index = {j: k for k, j in enumerate(p.buckets)}
    for (c, j), units in sorted(entering.items()):
        cap = p.caps(c)[bucket_index[j]]
        if cap < (units if only_overfull else p.counts[c]):
            cj_node[(c, j)] = nxt
            nxt += 1
    return cj_node, nxt


def _solve_full(p: _Problem) -> _Placement:
    """The exact graph: a (rack, bucket) node reaches every client of its rack through the client's cap.

    A (client, bucket) node is needed only where a free edge enters it and its
    cap binds; elsewhere one edge from the (rack, bucket) node to the client
    carries the cap.
    """
    nxt = len(p.nodes) + len(p.class_keys)
    cj_node, nxt = _client_bucket_nodes(p, nxt, only_overfull=False)
    gj_node: dict[tuple[int, int], int] = {}
    for g in p.racks:
        for j in p.buckets:
            gj_node[(g, j)] = nxt
            nxt += 1
    client_node = {i: nxt + k for k, i in enumerate(p.clients)}
    nxt += len(p.clients)
    graph, class_targets = _front(p, lambda c, j: cj_node.get((c, j), client_node[c]), gj_node, nxt)
    supply, edge = graph.supply, graph.add_edge
    pool_edges: list[tuple[int, int, int]] = []  # (edge, client, bucket) out of the (rack, bucket) nodes
    for i in p.clients:
        g = p.group_of[i]
        count = p.counts[i]
        for j, cap in zip(p.buckets, p.caps(i), strict=True):
            node = cj_node.get((i, j))
            if node is None:
                pool_edges.append((edge(gj_node[(g, j)], client_node[i], min(cap, count), 0), i, j))
            else:
                pool_edges.append((edge(gj_node[(g, j)], node, cap, 0), i, j))
                edge(node, client_node[i], cap, 0)
        supply[client_node[i]] = -count
    flow = graph.solve().flow
    out = _Placement(p)
    _read_front(p, flow, class_targets, out)
    for e, i, j in pool_edges:
        if flow[e]:
            out.client_quota.setdefault((p.group_of[i], j), {})[i] = flow[e]
    return out


def _solve_pooled(p: _Problem) -> _Placement | None:
    """A relaxation without per-client caps, realised on clients afterwards; None when it cannot be.

    ``min_traffic`` has no per-bucket caps, so there the graph is exact.  For
    ``balance_subtopology`` each rack's (rack, bucket) nodes feed one pool
    node (capped by the sum of its clients' caps), which feeds the rack's
    clients (capped by their loads): every solution of the full graph maps
    to one of the same cost here, so this optimum is a lower bound, and it
    is the full optimum whenever its arrivals fit under the caps.
    """
    nxt = len(p.nodes) + len(p.class_keys)
    cj_node, nxt = _client_bucket_nodes(p, nxt, only_overfull=True)  # free edges keep their caps
    gj_node: dict[tuple[int, int], int] = {}
    for g in p.racks:
        for j in p.buckets:
            gj_node[(g, j)] = nxt
            nxt += 1
    pool_node = {g: nxt + k for k, g in enumerate(p.racks)} if p.balance else {}
    nxt += len(pool_node)
    client_node = {i: nxt + k for k, i in enumerate(p.clients)}
    nxt += len(p.clients)
    graph, class_targets = _front(p, lambda c, j: cj_node.get((c, j), client_node[c]), gj_node, nxt)
    supply, edge = graph.supply, graph.add_edge
    bucket_index = {j: k for k, j in enumerate(p.buckets)}
    for (c, j), node in cj_node.items():
        edge(node, client_node[c], p.caps(c)[bucket_index[j]], 0)
    members: dict[int, list[int]] = {g: [] for g in p.racks}
    for i in p.clients:
        members[p.group_of[i]].append(i)
    first = len(graph.edges)
    if p.balance:
        for g in p.racks:
            room = [0] * len(p.buckets)
            for i in members[g]:
                for k, cap in enumerate(p.caps(i)):
                    room[k] += cap
            for k, j in enumerate(p.buckets):
                edge(gj_node[(g, j)], pool_node[g], room[k], 0)
        for g in p.racks:
            for i in members[g]:
                edge(pool_node[g], client_node[i], p.counts[i], 0)
    else:
        for g in p.racks:
            for i in members[g]:
                edge(gj_node[(g, 0)], client_node[i], p.counts[i], 0)
    for i in p.clients:
        supply[client_node[i]] = -p.counts[i]
    flow = graph.solve().flow
    out = _Placement(p)
    _read_front(p, flow, class_targets, out)
    e = first
    if not p.balance:
        for g in p.racks:
            for i in members[g]:
                if flow[e]:
                    out.client_quota.setdefault((g, 0), {})[i] = flow[e]
                e += 1
        return out
    arrivals = {}
    for g in p.racks:
        arrivals[g] = flow[e : e + len(p.buckets)]
        e += len(p.buckets)
    taken: dict[int, list[int]] = {}  # per client, free-edge units per bucket
    for node, (cid, _fr, _m) in enumerate(p.nodes):
        k = bucket_index[p.class_keys[cid][0]]
        for c, units in out.free[node]:
            taken.setdefault(c, [0] * len(p.buckets))[k] += units
    for g in p.racks:
        wants = []
        for i in members[g]:
            room = p.caps(i)
            if i in taken:
                room = [cap - used for cap, used in zip(room, taken[i], strict=True)]
                if min(room) < 0:  # cannot happen: overfull pairs have their own capped node
                    return None
            if flow[e]:
                wants.append((i, flow[e], room))
            e += 1
        fill = _realise(arrivals[g], wants)
        if fill is None:
            return None
        for i, k, units in fill:
            out.client_quota.setdefault((g, p.buckets[k]), {})[i] = units
    return out


def _realise(
    arrivals: list[int], wants: list[tuple[int, int, list[int]]]
) -> list[tuple[int, int, int]] | None:
    """Units per (client, bucket): bucket ``k`` sends ``arrivals[k]``, client ``i`` takes ``want`` under ``room``.

    A bipartite b-matching.  Greedy first (each client, largest want first,
    takes one unit from each of the buckets with most left, as in Ryser's
    construction); when that leaves a client short, an exact max flow
    decides.  Returns None when no such matching exists.
    """
    left = list(arrivals)
    got: dict[tuple[int, int], int] = {}
    short = False
    for i, want, room in sorted(wants, key=lambda w: (-w[1], w[0])):
        free_room = list(room)
        while want:
            open_ = sorted((-left[k], k) for k in range(len(left)) if left[k] and free_room[k])
            if not open_:
                short = True
                break
            for _neg, k in open_[:want]:
                left[k] -= 1
                free_room[k] -= 1
                got[(i, k)] = got.get((i, k), 0) + 1
                want -= 1
        if short:
            break
    if not short:
        return sorted((i, k, units) for (i, k), units in got.items())
    graph = FlowGraph()
    buckets = [graph.add_node(a) for a in arrivals]
    takers = [graph.add_node(-want) for _i, want, _room in wants]
    for w, (_i, _want, room) in enumerate(wants):
        for k in buckets:
            if arrivals[k] and room[k]:
                graph.add_edge(k, takers[w], room[k], 0)
    try:
        flow = graph.solve().flow
    except InfeasibleFlow:
        return None
    return sorted(
        (wants[v - len(buckets)][0], k, f) for (k, v, _c, _w), f in zip(graph.edges, flow, strict=True) if f
    )


def optimise_active(
    model: TaskModel,
    state: State,
    tasks: Sequence[int],
    strategy: str,
    traffic: int,
    non_overlap: int,
    previous: Sequence[Sequence[int]] | None = None,
) -> bool:
    """Move ``tasks`` (all active somewhere) to the minimum-cost placement with the same client loads.

    ``previous[t]``, when given, lists clients that also cost task ``t`` no move
    (stickiness to previous owners).  Returns False when nothing could be
    gained because every task costs the same everywhere.
    """
    if not tasks:
        return False
    groups = sorted(set(model.group_of))
    cross = model.active_cost  # crossings, or their bytes/s (weigh_by_traffic) in exact integers
    non_overlap *= model.move_unit  # in the same scale
    # A task's row is already per rack group, and every group has a client (the groups are the
    # clients' racks): the rows are the vectors, not rebuilt per task (issue 29).
    vectors = {t: cross[t] for t in tasks}
    if traffic == 0 or all(min(v) == max(v) for v in vectors.values()):
        import logging  # only here (issue 29: start-up)

        logging.getLogger(__name__).info("rack optimisation skipped: every task costs the same anywhere")
        return False
    owner_all = state.active_owner()
    owner = {t: owner_all[t] for t in tasks}
    if non_overlap == 0:
        # Moving is free at these weights (Kafka's for stateless tasks), but every move is churn:
        # among the cheapest placements take one with the fewest moves (traffic first, then moves).
        traffic, non_overlap = traffic * (len(tasks) + 1), 1
    p = _Problem(
        model,
        tasks,
        owner,
        strategy == "balance_subtopology",
        traffic,
        non_overlap,
        previous,
        vectors,
        groups,
    )
    placement = _solve_pooled(p)
    if placement is None:
        placement = _solve_full(p)
    new_owner = _tasks_from_quotas(p, placement, owner)
    check_write_back("optimise_active", tasks, owner, new_owner)
    for t in tasks:
        c = new_owner[t]
        if c != owner[t]:
            state.active[owner[t]].discard(t)
            state.active[c].add(t)
    return True


def _tasks_from_quotas(p: _Problem, placement: _Placement, owner: Mapping[int, int]) -> dict[int, int]:
    """Back from the flow's quotas to tasks: free edges first, then class -> rack -> client, preferring to stay."""
    new_owner: dict[int, int] = {}
    via_class: list[list[int]] = [[] for _ in p.class_keys]
    for node, (cid, _fr, members) in enumerate(p.nodes):
        rest = iter(members)
        for c, units in placement.free[node]:
            for _ in range(units):
                new_owner[next(rest)] = c
        via_class[cid].extend(rest)
    arriving: dict[tuple[int, int], list[int]] = {}
    for cid, (j, _vec) in enumerate(p.class_keys):
        quota = placement.rack_quota[cid]
        for t, g in _distribute(via_class[cid], quota, lambda t: p.group_of[owner[t]]):
            arriving.setdefault((g, j), []).append(t)
    for gj, arrived in arriving.items():
        for t, i in _distribute(arrived, placement.client_quota[gj], lambda t: owner[t]):
            new_owner[t] = i
    return new_owner


def check_write_back(
    where: str, tasks: Sequence[int], before: Mapping[int, int], after: Mapping[int, int]
) -> None:
    """The flow's placement ``after`` (task -> client) keeps what ``before`` had: checked before it is applied.

    As Kafka's ``RackAwareTaskAssignor`` checks after its min-cost flow: every
    task is placed exactly once, and every client holds as many of ``tasks``
    as before (the flow moves load, it never changes it).  Raises
    :class:`~rackplan.assignor.flow.PostconditionError` naming the first
    violation; the state is untouched then.
    """
    if len(after) != len(tasks) or any(t not in after for t in tasks):
        missing = [t for t in tasks if t not in after]
        extra = sorted(set(after) - set(tasks))
        raise PostconditionError(
            f"{where}: the flow placed {len(after)} tasks, not the {len(tasks)} given "
            f"(unplaced: {missing[:5]}, not asked for: {extra[:5]})"
        )
    old, new = Counter(before[t] for t in tasks), Counter(after[t] for t in tasks)
    for c in sorted(old.keys() | new.keys()):
        if old[c] != new[c]:
            raise PostconditionError(
                f"{where}: client {c} held {old[c]} of the optimised tasks before the flow, {new[c]} after"
            )


def _free_clients(baseline: int, previous: Sequence[int], counts: Sequence[int]) -> tuple[int, ...]:
    """Where a task costs no move: its baseline client, then its previous owners that hold some of these tasks."""
    if not previous:
        return (baseline,)  # most tasks: no sort, no list
    return (baseline, *(c for c in sorted(previous) if c != baseline and counts[c]))


def _distribute(
    items: list[int], quota: dict[int, int], prefer: Callable[[int], int]
) -> list[tuple[int, int]]:
    """Hand ``items`` out to quota holders, first to the holder each item prefers (stickiness)."""
    left = dict(quota)
    out: list[tuple[int, int]] = []
    rest: list[int] = []
    for t in sorted(items):
        p = prefer(t)
        if left.get(p, 0) > 0:
            left[p] -= 1
            out.append((t, p))
        else:
            rest.append(t)
    holders = sorted(h for h in left if left[h] > 0)
    hi = 0
    for t in rest:
        while left[holders[hi]] == 0:
            hi += 1
        left[holders[hi]] -= 1
        out.append((t, holders[hi]))
    return out
