"""Rack-aware optimisation of a Streams assignment (KIP-925), on aggregated flow graphs.

Kafka builds one edge per (task, client) pair and cancels cycles.  Here a
task's traffic cost depends only on its client's *rack*, so tasks reach a
rack node (one per rack, or per rack and sub-topology for
``balance_subtopology``) through a class node shared by every task with the
same cost profile, and reach the clients that cost them no move (the baseline
owner, optionally previous owners) through one direct edge each.  The optimum
of that graph equals the optimum of Kafka's full graph: any full solution maps
to one of equal cost, and any flow here is realised by tasks on clients at no
greater cost.  Client loads are those of the baseline, as in Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from .flow import min_cost_flow_phases
from .model import StreamsApp
from .streams_tasks import State, TaskModel

log = logging.getLogger(__name__)


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
    return traffic * model.active_cross[t][model.group_of[c]] + (0 if c in free else non_overlap)


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
    if all(len({model.active_cross[t][g] for g in groups}) == 1 for t in tasks) or traffic == 0:
        log.info("rack optimisation skipped: every task costs the same on every client")
        return False
    owner_all = state.active_owner()
    owner = {t: owner_all[t] for t in tasks}
    counts = [0] * model.num_clients
    for t in tasks:
        counts[owner[t]] += 1
    balance = strategy == "balance_subtopology"
    caps: dict[tuple[int, int], int]
    if balance:
        caps = subtopology_caps(model, counts, tasks)
    else:
        caps = {(i, 0): counts[i] for i in range(model.num_clients) if counts[i]}
    bucket = {t: (model.sub_of[t] if balance else 0) for t in tasks}
    free = {t: _free_clients(owner[t], previous[t] if previous else (), counts) for t in tasks}

    # node numbering
    k = len(tasks)
    classes: dict[tuple[int, tuple[int, ...]], int] = {}
    members: list[list[int]] = []
    for t in tasks:
        key = (bucket[t], tuple(model.active_cross[t][g] for g in groups))
        if key not in classes:
            classes[key] = len(classes)
            members.append([])
        members[classes[key]].append(t)
    class_base = k
    nxt = class_base + len(classes)
    gj_node: dict[tuple[int, int], int] = {}
    cj_node: dict[tuple[int, int], int] = {}
    group_clients: dict[int, list[int]] = {}
    for i in range(model.num_clients):
        group_clients.setdefault(model.group_of[i], []).append(i)
    for i, j in sorted(caps):
        if caps[(i, j)] > 0:
            cj_node[(i, j)] = nxt
            nxt += 1
            g = model.group_of[i]
            if (g, j) not in gj_node:
                gj_node[(g, j)] = -1
    for gj in sorted(gj_node):
        gj_node[gj] = nxt
        nxt += 1
    client_node = {i: nxt + n for n, i in enumerate(i for i in range(model.num_clients) if counts[i])}
    num_nodes = nxt + len(client_node)

    edges: list[tuple[int, int, int, int]] = []
    supply = [0] * num_nodes
    task_class_edge: list[int] = []
    free_edges: list[list[tuple[int, int]]] = []
    for n, t in enumerate(tasks):
        supply[n] = 1
        key = (bucket[t], tuple(model.active_cross[t][g] for g in groups))
        task_class_edge.append(len(edges))
        edges.append((n, class_base + classes[key], 1, 0))
        fe = []
        for c in free[t]:
            node = cj_node.get((c, bucket[t]))
            if node is not None:
                fe.append((len(edges), c))
                edges.append((n, node, 1, traffic * model.active_cross[t][model.group_of[c]]))
        free_edges.append(fe)
    class_edges: list[list[tuple[int, int]]] = []
    for (j, vec), cid in classes.items():
        ce = []
        for gi, g in enumerate(groups):
            node = gj_node.get((g, j))
            if node is not None:
                ce.append((len(edges), g))
                edges.append((class_base + cid, node, len(members[cid]), traffic * vec[gi] + non_overlap))
        class_edges.append(ce)
    gj_edges: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for (i, j), node in cj_node.items():
        g = model.group_of[i]
        gj_edges.setdefault((g, j), []).append((len(edges), i))
        edges.append((gj_node[(g, j)], node, caps[(i, j)], 0))
        edges.append((node, client_node[i], caps[(i, j)], 0))
    for i, node in client_node.items():
        supply[node] = -counts[i]

    result = min_cost_flow_phases(num_nodes, edges, supply)
    flow = result.flow

    new_owner: dict[int, int] = {}
    via_class: list[list[int]] = [[] for _ in members]
    for n, t in enumerate(tasks):
        if flow[task_class_edge[n]]:
            key = (bucket[t], tuple(model.active_cross[t][g] for g in groups))
            via_class[classes[key]].append(t)
        else:
            for e, c in free_edges[n]:
                if flow[e]:
                    new_owner[t] = c
                    break
    arriving: dict[tuple[int, int], list[int]] = {}
    for (j, _vec), cid in classes.items():
        quota = {g: flow[e] for e, g in class_edges[cid] if flow[e]}
        for t, g in _distribute(via_class[cid], quota, lambda t: model.group_of[owner[t]]):
            arriving.setdefault((g, j), []).append(t)
    for gj, arrived in arriving.items():
        quota = {i: flow[e] for e, i in gj_edges[gj] if flow[e]}
        for t, i in _distribute(arrived, quota, lambda t: owner[t]):
            new_owner[t] = i
    for t in tasks:
        c = new_owner[t]
        if c != owner[t]:
            state.active[owner[t]].discard(t)
            state.active[c].add(t)
    return True


def _free_clients(baseline: int, previous: Sequence[int], counts: Sequence[int]) -> list[int]:
    out = [baseline]
    for c in sorted(previous):
        if c != baseline and counts[c]:
            out.append(c)
    return out


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
