"""Exact standby placement under the spread rule: one min-cost flow (KIP-925's standby step, solved).

The problem.  The baseline placement (least-loaded, spread, balanced) fixes
how many standbys each client holds and how many each task has (``k_t``).
Every placement keeping those counts is balanced exactly as the baseline is,
so only *which* task goes *where* is chosen, subject to:

- no client holds two copies of a task (its active or another standby);
- spread over one key (a tag, or the client rack when no tags are set): a
  task's standbys cover at least ``m_t`` distinct values other than its
  active's value (a client without a value covers none), ``m_t`` being the
  most they can cover: ``min(k_t, values other than the active's)``.  So a
  standby shares its active's value (its rack) only when every other value
  already holds one, which is the rule Kafka documents for its tags.
  (Should the baseline cover fewer, its own count is kept as the floor.)

Cost: ``a * cross + b * moved``, ``cross`` the changelog partitions without
a replica in the client's rack, ``moved`` the copies not on a client that held
the task in the baseline.  ``cross_first`` weights make the cross-rack count
lexicographically first (``a`` above any number of moves).

Why one flow expresses the spread rule.  Each task sends ``m_t`` *spread*
units, at most one per value and never to the active's value, and
``k_t - m_t`` *extra* units anywhere.  A placement covering at least ``m_t``
new values splits that way (call one copy in each of ``m_t`` covered values
spread, the rest extra), and every split satisfies the rule; the two kinds
meet in one node per (task, value), whose edges to clients have capacity one.

Aggregation.  Costs depend on the client's rack only, so the graph sends a
task's copies to one node per (value, rack) *group*, which feeds its clients
by their counts; direct edges reach the task's baseline clients (no move
cost).  That graph forgets "not twice on one client, not on the active's
client" inside a group, so it is a relaxation: its optimum is a lower bound.
Its arrivals are then placed on the group's clients (greedy, then an exact
max flow); when that succeeds, the bound is reached and the placement is
optimal.  Spread units never conflict there (one per value, never in the
active's value), so only extra units can fail to place; then the groups that
failed are *expanded* (their clients reached one by one, one edge per (task,
client) there) and the flow solved again, until every group places its
arrivals.  Expanding every group gives the full task x client graph, exact,
so this ends; in practice a round or two of small groups.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from ..flow import FlowGraph, InfeasibleFlow
from ..record import record
from .tasks import State, TaskModel

#: value id of a client without a value for the spread key: never covers a value
NO_VALUE = -1


@record(frozen=True)
class StandbyProblem:
    """One standby placement problem, indexed.

    ``val[c]`` is client ``c``'s spread value id (``NO_VALUE`` when it has
    none; all ``NO_VALUE`` when nothing spreads), ``count[c]`` its standby
    count, ``baseline[t]`` the clients holding task ``t`` as standby,
    ``spread[t]`` the distinct new values its standbys must cover.
    """

    model: TaskModel
    tasks: tuple[int, ...]
    owner: tuple[int, ...]
    val: tuple[int, ...]
    count: tuple[int, ...]
    baseline: dict[int, tuple[int, ...]]
    spread: dict[int, int]
    taken_values: tuple[int, ...]  # values of clients that hold standbys (others take none), sorted
    keep_values: bool = False  # the stricter rule: each task keeps its baseline count in every value

    def racks_forced(self) -> bool:
        """Whether every placement puts each task's copies on the same racks as the baseline.

        That is the case when every task must cover every other value with
        one copy each and each value lies in one rack (3 racks, 2 standbys,
        spread over racks): the cross-rack count cannot change, so the
        baseline, which moves nothing, is optimal for every objective here.
        """
        if self.keep_values:
            return False
        rack_of: dict[int, int] = {}
        group_of = self.model.group_of
        for c, n in enumerate(self.count):
            if n and rack_of.setdefault(self.val[c], group_of[c]) != group_of[c]:
                return False
        if NO_VALUE in rack_of:
            return False
        return all(len(self.baseline[t]) == self.spread[t] == len(self.new_values(t)) for t in self.tasks)

    def new_values(self, t: int) -> list[int]:
        """Values task ``t``'s spread units may cover: every value but its active's (and none)."""
        mine = self.val[self.owner[t]]
        return [v for v in self.taken_values if v != mine and v != NO_VALUE]


def covered(val: Sequence[int], owner: int, holders: Sequence[int]) -> int:
    """Distinct values other than the active's that ``holders`` cover."""
    mine = val[owner]
    return len({val[c] for c in holders if val[c] != NO_VALUE and val[c] != mine})


def build_problem(
    model: TaskModel, state: State, val: Sequence[int], keep_values: bool = False
) -> StandbyProblem:
    """The problem of the current standbys of ``state`` (their placement is the baseline).

    With ``keep_values`` a copy may only move between clients of the same
    value (several tag keys: ``val`` numbers the clients' value tuples).
    """
    owner = state.active_owner()
    holders: dict[int, list[int]] = {}
    for c in range(model.num_clients):
        for t in state.standby[c]:
            holders.setdefault(t, []).append(c)
    tasks = tuple(sorted(holders))
    # the most new values k standbys can cover: min(k, values other than the active's); dropping the
    # active's client from the candidates can only drop the active's own value, which never counts
    distinct = len({v for v in val if v != NO_VALUE})
    spread = {
        t: min(
            len(holders[t]),
            distinct - (val[owner[t]] != NO_VALUE),
            covered(val, owner[t], holders[t]),
        )
        for t in tasks
    }
    return StandbyProblem(
        model=model,
        tasks=tasks,
        owner=tuple(owner),
        val=tuple(val),
        count=tuple(len(s) for s in state.standby),
        baseline={t: tuple(sorted(holders[t])) for t in tasks},
        spread=spread,
        taken_values=tuple(sorted({val[c] for c in range(model.num_clients) if state.standby[c]})),
        keep_values=keep_values,
    )


#: a (value, rack) group of clients: clients with the same spread value in the same rack
GroupKey = tuple[int, int]


@record(frozen=True)
class _Graph:
    """A built flow: the solver's input (``flow``), and what the edges that matter mean.

    ``put[e] = (t, c)``: flow on edge ``e`` places task ``t`` on client ``c``.
    ``arrive[e] = (t, g)``: flow on ``e`` sends that many copies of ``t`` into group node ``g``.
    ``quota[e] = (g, c)``: flow on ``e`` is how many arrivals of group node ``g`` client ``c`` takes.
    ``group_key[g]`` names group node ``g``.
    """

    flow: FlowGraph
    put: dict[int, tuple[int, int]]
    arrive: dict[int, tuple[int, int]]
    quota: dict[int, tuple[int, int]]
    group_key: dict[int, GroupKey]


def _build(p: StandbyProblem, a: int, b: int, expanded: frozenset[GroupKey] | None) -> _Graph:
    """The graph with the clients of ``expanded`` groups reached one by one, the others through a group node.

    ``expanded=None`` expands every group: the full task x client graph, exact.
    Nodes: clients first (each must receive its count), then group nodes, then
    per task one entry node (``k_t = 1``) or spread and extra nodes feeding
    one node per (task, value).
    """
    model = p.model
    n_c = model.num_clients
    group_of = model.group_of
    cross = model.standby_cross
    takers = [c for c in range(n_c) if p.count[c]]
    graph = FlowGraph(n_c)
    edge = graph.add_edge
    put: dict[int, tuple[int, int]] = {}
    arrive: dict[int, tuple[int, int]] = {}
    quota: dict[int, tuple[int, int]] = {}
    for c in takers:
        graph.supply[c] = -p.count[c]
    direct_of_value: dict[int, list[int]] = {}  # clients of expanded groups, reached one by one
    direct = [False] * n_c
    group_node: dict[GroupKey, int] = {}
    group_members: dict[int, list[int]] = {}
    in_group = [-1] * n_c
    for c in takers:
        key = (p.val[c], group_of[c])
        if expanded is None or key in expanded:
            direct[c] = True
            direct_of_value.setdefault(p.val[c], []).append(c)
            continue
        if key not in group_node:
            group_node[key] = graph.add_node()
            group_members[group_node[key]] = []
        in_group[c] = group_node[key]
        group_members[group_node[key]].append(c)
    for g, members in group_members.items():
        for c in members:
            quota[edge(g, c, p.count[c], 0)] = (g, c)
    groups_of_value: dict[int, list[int]] = {}
    for (v, _rack), g in group_node.items():
        groups_of_value.setdefault(v, []).append(g)

    node = graph.add_node

    def reach(u: int, t: int, v: int, cap: int) -> None:
        """Edges from ``u`` to wherever copies of ``t`` in value ``v`` can go."""
        active = p.owner[t]
        base = p.baseline[t]
        row = cross[t]
        for c in direct_of_value.get(v, ()):
            if c != active:
                put[edge(u, c, 1, a * row[group_of[c]] + (0 if c in base else b))] = (t, c)
        for g in groups_of_value.get(v, ()):
            members = group_members[g]
            room = len(members) - (1 if in_group[active] == g else 0)
            if room > 0:
                arrive[edge(u, g, min(cap, room), a * row[group_of[members[0]]] + b)] = (t, g)
        for c in base:
            if p.val[c] == v and not direct[c]:
                put[edge(u, c, 1, a * row[group_of[c]])] = (t, c)

    values = list(p.taken_values)
    for t in p.tasks:
        if p.keep_values:
            kept: dict[int, int] = {}
            for c in p.baseline[t]:
                kept[p.val[c]] = kept.get(p.val[c], 0) + 1
            for v, n in sorted(kept.items()):
                reach(node(n), t, v, n)
            continue
        k = len(p.baseline[t])
        m = p.spread[t]
        new = p.new_values(t)
        if k == 1:
            u = node(1)
            for v in new if m else values:
                reach(u, t, v, 1)
            continue
        # one node per (task, value): spread and extra units meet there, then capacity one per client
        per_value = {v: node(0) for v in values}
        if m:
            s = node(m)
            for v in new:
                edge(s, per_value[v], 1, 0)
        if k > m:
            x = node(k - m)
            for v in values:
                edge(x, per_value[v], k - m, 0)
        for v in values:
            reach(per_value[v], t, v, k)
    group_key = {g: key for key, g in group_node.items()}
    return _Graph(graph, put, arrive, quota, group_key)


def _first_expansion(p: StandbyProblem) -> frozenset[GroupKey] | None:
    """Groups reached client by client in the first round: none.

    A seam for the tests: returning None starts from the full graph, whose
    optimum the aggregated rounds must reach.
    """
    return frozenset()


def solve(p: StandbyProblem, a: int, b: int) -> dict[int, list[int]]:
    """The optimal placement: for each task, its standby clients (sorted).

    The groups whose arrivals cannot be placed are expanded (their clients
    reached one by one, exactly) and the flow solved again, until every
    group places its arrivals; each round expands at least one group, and
    with all expanded the graph is the full one, which always places.
    """
    expanded = _first_expansion(p)
    while True:
        graph = _build(p, a, b, expanded)
        flow = graph.flow.solve().flow
        placed, failed = _realise(p, graph, flow)
        if not failed:
            return {t: sorted(cs) for t, cs in placed.items()}
        assert expanded is not None  # the full graph has no groups, so nothing fails
        expanded = expanded | failed


def _realise(
    p: StandbyProblem, graph: _Graph, flow: list[int]
) -> tuple[dict[int, list[int]], frozenset[GroupKey]]:
    """Clients for the flow's arrivals, group by group; also the groups that cannot take theirs."""
    placed: dict[int, list[int]] = {t: [] for t in p.tasks}
    holds: list[set[int]] = [set() for _ in p.count]
    for e, (t, c) in graph.put.items():
        if flow[e]:
            placed[t].append(c)
            holds[c].add(t)
    arrivals: dict[int, list[tuple[int, int]]] = {}
    for e, (t, g) in graph.arrive.items():
        if flow[e]:
            arrivals.setdefault(g, []).append((t, flow[e]))
    quotas: dict[int, list[tuple[int, int]]] = {}
    for e, (g, c) in graph.quota.items():
        if flow[e]:
            quotas.setdefault(g, []).append((c, flow[e]))
    failed: set[GroupKey] = set()
    for g in sorted(arrivals):
        fill = _fill_group(arrivals[g], quotas.get(g, []), p.owner, holds)
        if fill is None:
            failed.add(graph.group_key[g])
            continue
        for t, c in fill:
            placed[t].append(c)
            holds[c].add(t)
    return placed, frozenset(failed)


def _fill_group(
    arrivals: list[tuple[int, int]],
    quotas: list[tuple[int, int]],
    owner: Sequence[int],
    holds: list[set[int]],
) -> list[tuple[int, int]] | None:
    """(task, client) pairs placing ``arrivals`` (task, copies) on clients with ``quotas`` (client, units).

    A client takes a task at most once and never its own active task.  Greedy
    first (largest copies first, each to the clients with most room left);
    when that falls short, an exact max flow decides.
    """
    heap = [(-q, c) for c, q in quotas]
    heapq.heapify(heap)
    out: list[tuple[int, int]] = []
    for t, copies in sorted(arrivals, key=lambda x: (-x[1], x[0])):
        skipped: list[tuple[int, int]] = []
        got = 0
        while got < copies and heap:
            neg, c = heapq.heappop(heap)
            if c == owner[t] or t in holds[c]:
                skipped.append((neg, c))
                continue
            out.append((t, c))
            got += 1
            if neg < -1:
                skipped.append((neg + 1, c))
        for item in skipped:
            heapq.heappush(heap, item)
        if got < copies:
            return _fill_exactly(arrivals, quotas, owner, holds)
    return out


def _fill_exactly(
    arrivals: list[tuple[int, int]],
    quotas: list[tuple[int, int]],
    owner: Sequence[int],
    holds: list[set[int]],
) -> list[tuple[int, int]] | None:
    """:func:`_fill_group` by max flow (tasks x clients, capacity one); None when infeasible."""
    graph = FlowGraph()
    tasks = [graph.add_node(copies) for _t, copies in arrivals]
    clients = [graph.add_node(-q) for _c, q in quotas]
    for i, (t, _copies) in enumerate(arrivals):
        for j, (c, _q) in enumerate(quotas):
            if c != owner[t] and t not in holds[c]:
                graph.add_edge(tasks[i], clients[j], 1, 0)
    try:
        flow = graph.solve().flow
    except InfeasibleFlow:
        return None
    n_t = len(tasks)
    return [
        (arrivals[u][0], quotas[v - n_t][0])
        for (u, v, _cap, _w), f in zip(graph.edges, flow, strict=True)
        if f
    ]
