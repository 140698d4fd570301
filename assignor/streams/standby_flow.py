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

Pools.  The node per (task, value) is tasks x values; with thousands of
values (each client its own ``host`` tag) that was gigabytes.  A value only
one client takes needs none (one copy per client is one unit per value), so
when tasks x values pass :data:`POOL_ABOVE` such clients are reached through
one pool per rack (:func:`_pooled`, :class:`_Pools`): the same relaxation
argument, arrivals dealt as a group's (only an extra unit may take the
active's own value there); a pool that cannot deal is expanded into its
clients' groups.  Below the threshold the graph is the one above.

Bound.  No round builds more than :data:`MAX_EDGES` edges (values shared by
few clients each, or big groups expanded client by client, still grow the
graph): :class:`GraphTooLarge` ends the search, and the caller places the
standbys by pairwise swaps instead (no exact placement beyond it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..flow import FlowGraph
from ..record import record
from .standby_fill import fill_group
from .tasks import State, TaskModel

#: value id of a client without a value for the spread key: never covers a value
NO_VALUE = -1
#: the value part of a pool's group key, ``(POOL, rack)``: the rack's clients of values only they take
POOL = -2
#: pools are used when tasks x spread values pass this (below, the graph is small and plans stay as they were)
POOL_ABOVE = 100_000
#: the most edges a round's graph may have (about 200 bytes each, solver included); beyond, no exact placement
MAX_EDGES = 3_000_000


class GraphTooLarge(Exception):
    """A round's graph would have more than :data:`MAX_EDGES` edges."""


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
        values = {v for v in self.taken_values if v != NO_VALUE}
        return all(
            len(self.baseline[t]) == self.spread[t] == len(values) - (self.val[self.owner[t]] in values)
            for t in self.tasks
        )


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
    ``avoid[e] = c``: the copies ``e`` brings into a pool are spread units, which client ``c`` (of the
    task's active's value) may not take unless other copies of the task arrive there too.
    """

    flow: FlowGraph
    put: dict[int, tuple[int, int]]
    arrive: dict[int, tuple[int, int]]
    quota: dict[int, tuple[int, int]]
    group_key: dict[int, GroupKey]
    avoid: dict[int, int]


def _pooled(p: StandbyProblem, expanded: frozenset[GroupKey] | None) -> list[bool]:
    """Per client, whether it is reached through its rack's pool this round.

    When tasks x values pass :data:`POOL_ABOVE`, a taker whose value no
    other taker has (each client its own ``host`` tag, say) joins its rack's
    pool, unless that pool was expanded: one copy per client then means one
    spread unit per value, so the pool needs no node per (task, value), which
    made the graph tasks x values (2,000 values, 4,000 tasks: 3 GB).
    """
    n = len(p.count)
    if expanded is None or p.keep_values or len(p.tasks) * len(p.taken_values) <= POOL_ABOVE:
        return [False] * n
    takers = Counter(p.val[c] for c in range(n) if p.count[c])
    rack = p.model.group_of
    return [
        bool(p.count[c])
        and p.val[c] != NO_VALUE
        and takers[p.val[c]] == 1
        and (POOL, rack[c]) not in expanded
        for c in range(n)
    ]


@record()
class _Groups:
    """Where a round's graph sends copies: clients reached one by one (``direct``), or group nodes.

    ``direct_of_value[v]``: the direct clients of value ``v``; ``members[g]``
    the clients of group node ``g`` (whose key is ``key[g]``), ``in_group[c]``
    client ``c``'s group node (-1: direct or no standbys), ``of_value[v]``
    the group nodes of value ``v`` (pools under :data:`POOL`).
    """

    direct: list[bool]
    direct_of_value: dict[int, list[int]]
    members: dict[int, list[int]]
    key: dict[int, GroupKey]
    in_group: list[int]
    of_value: dict[int, list[int]]


def _groups(
    p: StandbyProblem,
    graph: FlowGraph,
    quota: dict[int, tuple[int, int]],
    expanded: frozenset[GroupKey] | None,
) -> tuple[_Groups, list[bool]]:
    """The clients' demands, group nodes and their quota edges in ``graph``; and which clients are pooled."""
    n_c, rack = len(p.count), p.model.group_of
    pooled = _pooled(p, expanded)
    out = _Groups([False] * n_c, {}, {}, {}, [-1] * n_c, {})
    node_of: dict[GroupKey, int] = {}
    for c in range(n_c):
        if not p.count[c]:
            continue
        graph.supply[c] = -p.count[c]
        key = (POOL, rack[c]) if pooled[c] else (p.val[c], rack[c])
        if not pooled[c] and (expanded is None or key in expanded):
            out.direct[c] = True
            out.direct_of_value.setdefault(p.val[c], []).append(c)
            continue
        if key not in node_of:
            node_of[key] = graph.add_node()
            out.members[node_of[key]] = []
            out.key[node_of[key]] = key
            out.of_value.setdefault(key[0], []).append(node_of[key])
        out.in_group[c] = node_of[key]
        out.members[node_of[key]].append(c)
    for g, members in out.members.items():
        for c in members:
            quota[graph.add_edge(g, c, p.count[c], 0)] = (g, c)
    return out, pooled


def _build(p: StandbyProblem, a: int, b: int, expanded: frozenset[GroupKey] | None) -> _Graph:
    """The graph with the clients of ``expanded`` groups reached one by one, the others through a group node.

    ``expanded=None`` expands every group: the full task x client graph, exact.
    Nodes: clients first (each must receive its count), then group nodes (and
    pools, :func:`_pooled`), then per task one entry node (``k_t = 1``) or
    spread and extra nodes feeding one node per (task, value) and the pools
    (:class:`_Pools`).  Raises :class:`GraphTooLarge` past :data:`MAX_EDGES`.
    """
    group_of = p.model.group_of
    cross = p.model.standby_cross
    graph = FlowGraph(p.model.num_clients)
    edge = graph.add_edge
    put: dict[int, tuple[int, int]] = {}
    arrive: dict[int, tuple[int, int]] = {}
    quota: dict[int, tuple[int, int]] = {}
    avoid: dict[int, int] = {}
    groups, pooled = _groups(p, graph, quota, expanded)
    node = graph.add_node

    def reach(u: int, t: int, v: int, cap: int) -> None:
        """Edges from ``u`` to wherever copies of ``t`` in value ``v`` can go."""
        active = p.owner[t]
        base = p.baseline[t]
        row = cross[t]
        for c in groups.direct_of_value.get(v, ()):
            if c != active:
                put[edge(u, c, 1, a * row[group_of[c]] + (0 if c in base else b))] = (t, c)
        for g in groups.of_value.get(v, ()):
            members = groups.members[g]
            room = len(members) - (1 if groups.in_group[active] == g else 0)
            if room > 0:
                arrive[edge(u, g, min(cap, room), a * row[group_of[members[0]]] + b)] = (t, g)
        for c in base:
            if p.val[c] == v and not groups.direct[c]:
                put[edge(u, c, 1, a * row[group_of[c]])] = (t, c)

    pool = _Pools(p, a, b, pooled, groups)
    values = [v for v in p.taken_values if v not in pool.client_of_value]
    for t in p.tasks:
        if len(graph.edges) > MAX_EDGES:
            raise GraphTooLarge
        if p.keep_values:
            kept: dict[int, int] = {}
            for c in p.baseline[t]:
                kept[p.val[c]] = kept.get(p.val[c], 0) + 1
            for v, n in sorted(kept.items()):
                reach(node(n), t, v, n)
            continue
        k = len(p.baseline[t])
        m = p.spread[t]
        mine = p.val[p.owner[t]]
        new = [v for v in values if v != mine and v != NO_VALUE]
        if k == 1:
            u = node(1)
            for v in new if m else values:
                reach(u, t, v, 1)
            pool.edges(graph, t, u if m else None, None if m else u, put, arrive, avoid)
            continue
        # one node per (task, value): spread and extra units meet there, then capacity one per client
        per_value = {v: node(0) for v in values}
        s = x = None
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
        pool.edges(graph, t, s, x, put, arrive, avoid)
    return _Graph(graph, put, arrive, quota, groups.key, avoid)


class _Pools:
    """The edges from a task's spread and extra nodes into the pools, and to its pooled baseline clients.

    A pool's clients take pairwise different values, none another client's,
    so copies of a task on different clients there cover different values,
    all new but the active's own (its one client, if it is in the pool, may
    take only an extra unit: :attr:`_Graph.avoid`).  A pooled baseline
    client is reached directly, fed by the spread node (when its value is
    new) and the extra node through one node of capacity one.
    """

    def __init__(self, p: StandbyProblem, a: int, b: int, pooled: list[bool], groups: _Groups) -> None:
        self.p, self.a, self.b, self.pooled, self.in_group = p, a, b, pooled, groups.in_group
        self.pools = [
            (g, len(groups.members[g]), p.model.group_of[groups.members[g][0]])
            for g in groups.of_value.get(POOL, ())
        ]
        self.client_of_value = {p.val[c]: c for c, yes in enumerate(pooled) if yes}

    def edges(
        self,
        graph: FlowGraph,
        t: int,
        s: int | None,
        x: int | None,
        put: dict[int, tuple[int, int]],
        arrive: dict[int, tuple[int, int]],
        avoid: dict[int, int],
    ) -> None:
        """Task ``t``'s pool edges from ``s`` (spread units, if any) and ``x`` (extra units, if any)."""
        p, edge, in_group = self.p, graph.add_edge, self.in_group
        row = p.model.standby_cross[t]
        active = p.owner[t]
        mine = self.client_of_value.get(p.val[active])  # the pooled client of the active's value
        for c in p.baseline[t]:
            if not self.pooled[c]:
                continue
            feeds = [u for u in (s if p.val[c] != p.val[active] else None, x) if u is not None]
            if len(feeds) > 1:
                joint = graph.add_node()
                for u in feeds:
                    edge(u, joint, 1, 0)
                feeds = [joint]
            if feeds:
                put[edge(feeds[0], c, 1, self.a * row[p.model.group_of[c]])] = (t, c)
        k, m = len(p.baseline[t]), p.spread[t]
        for g, size, rack in self.pools:
            cost = self.a * row[rack] + self.b
            if s is not None and size - (mine is not None and in_group[mine] == g) > 0:
                e = edge(s, g, min(m, size - (mine is not None and in_group[mine] == g)), cost)
                arrive[e] = (t, g)
                if mine is not None and in_group[mine] == g:
                    avoid[e] = mine
            if x is not None and size - (in_group[active] == g) > 0:
                arrive[edge(x, g, min(k - m, size - (in_group[active] == g)), cost)] = (t, g)


def _first_expansion(p: StandbyProblem) -> frozenset[GroupKey] | None:
    """Groups reached client by client in the first round: none.

    A seam for the tests: returning None starts from the full graph, whose
    optimum the aggregated rounds must reach.
    """
    return frozenset()


def solve(p: StandbyProblem, a: int, b: int) -> dict[int, list[int]]:
    """The optimal placement: for each task, its standby clients (sorted).

    The groups whose arrivals cannot be placed are expanded (their clients
    reached one by one, exactly; a pool's, through their own groups first)
    and the flow solved again, until every group places its arrivals; each
    round expands at least one group, and with all expanded the graph is the
    full one, which always places.  Raises :class:`GraphTooLarge` when a
    round's graph would pass :data:`MAX_EDGES`.
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
    arrivals: dict[int, dict[int, int]] = {}
    avoid: dict[int, dict[int, int]] = {}
    extra: set[tuple[int, int]] = set()
    for e, (t, g) in graph.arrive.items():
        if flow[e]:
            got = arrivals.setdefault(g, {})
            got[t] = got.get(t, 0) + flow[e]
            if e in graph.avoid:
                avoid.setdefault(g, {})[t] = graph.avoid[e]
            else:
                extra.add((g, t))
    quotas: dict[int, list[tuple[int, int]]] = {}
    for e, (g, c) in graph.quota.items():
        if flow[e]:
            quotas.setdefault(g, []).append((c, flow[e]))
    failed: set[GroupKey] = set()
    for g in sorted(arrivals):
        banned = None
        if graph.group_key[g][0] == POOL:
            banned = {t: c for t, c in avoid.get(g, {}).items() if (g, t) not in extra}
        fill = fill_group(list(arrivals[g].items()), quotas.get(g, []), p.owner, holds, banned)
        if fill is None:
            failed.add(graph.group_key[g])
            continue
        for t, c in fill:
            placed[t].append(c)
            holds[c].add(t)
    return placed, frozenset(failed)
