"""Step 4 of the general cooperative-sticky path: exact placement at given counts, and count shifts.

The contract's balance rule (no holder of a topic two or more above one of the
topic's subscribers) is not a flow constraint, but once every member's count
is fixed it is: member ``i`` may hold topic ``t`` exactly when
``count[i] <= min(count of t's subscribers) + 1``.  So at fixed counts one
min-cost flow finds the balanced assignment with the fewest cross-rack
partitions and then the fewest moves (cost ``BIG * cross_rack + moves``; a
partition that stays with its owner costs no move).  Every partition takes
part, owned ones included, so an owned partition moves only when that lowers
the final cross-rack count, or the moves.  Members reach partitions through
one hub per (topic, rack class); partitions come in pools of equal (owner,
topic, replica-rack mask).

Fixed counts are the flow's blind spot: Kafka's balancing hands a partition
from a member to a less loaded one and so changes counts, and sometimes ends
more local than any assignment at the counts we reached (issue 10: 4.7% of
small unequal cases, most large ones).  A *count shift* closes that gap: some
members (the *losers*) hold one partition fewer and as many members that sit
at the bottom of a topic hold one more, the flow choosing which and through
which chain of moves.  A result that breaks balance is repaired and retried a
few times: a member that grew where it may not is barred from growing, a
holder left two above a topic's new minimum becomes a loser too.  A shift is
kept only if it is balanced and strictly cheaper, so the search ends.  It is a
local search over counts, exact at each count vector it visits; the
differential tests against Kafka's own assignor (``tests/assignor/test_vs_kafka_java.py``)
measure how often it is still worse than Kafka (never, so far, on thousands of
random cases; see docs/assignors.md).
"""

from __future__ import annotations

from ...flow import FlowGraph, FlowResult, InfeasibleFlow
from ...flow.memo import FlowMemo
from ...record import field, record
from .general_edges import PoolEdges, pool_edges
from .general_floor import floor_cost
from .general_nodes import members_and_hubs
from .general_pools import Pooled, Pools, pools_of
from .general_readback import read_back
from .general_spare import spare_units
from .general_state import GeneralState

#: Flow edges the count-shift searches of one run may build, all of its calls together: small groups are
#: searched in full, large ones within a bounded multiple of one flow's work (deterministic: counted, not
#: timed; a run's answer depends on its input alone, which the settling's simulations rely on).
SHIFT_WORK = 60_000


@record()
class Budget:
    """Flow edges the count-shift search may still build, and the flows it solved (shared by the runs
    of one settling call: the same graph is solved once)."""

    edges: int = SHIFT_WORK
    memo: FlowMemo = field(default_factory=FlowMemo)

    def spent(self) -> bool:
        return self.edges <= 0


@record(frozen=True)
class Repair:
    """Why a shift came out unbalanced, and the retry that avoids it.

    ``kind`` is ``"ban"`` (``member`` grew where it may not: bar it from
    growing), ``"lose"`` (``member`` is left two above a topic's minimum: it
    must lose one too) or ``"keep"`` (``member`` dropped to a topic's minimum
    that another holder now exceeds by two: bar it from dropping).
    """

    kind: str
    member: int


def place(
    state: GeneralState,
    losers: frozenset[int] = frozenset(),
    banned: frozenset[int] = frozenset(),
    gainer: int = -1,
    droppers: frozenset[int] = frozenset(),
    budget: Budget | None = None,
) -> bool | Repair:
    """Re-place every partition exactly at the current counts, minus one per loser plus as many spare units.

    The spare units go to members the flow picks, or all to ``gainer`` when one is named (then every
    count is fixed and the result balanced by construction).  Each of ``droppers`` may also hold one
    fewer if as many members at the bottom of a topic hold one more, as the flow finds cheapest: every
    such shift at once.  True when it applied a strictly cheaper balanced assignment, False when there
    is none (or the flow is infeasible), a :class:`Repair` when the cheaper assignment it found is
    unbalanced.

    The phases: the counts the flow must meet; the partitions pooled and the
    current cost; the cases no flow can improve; the network (members behind
    one hub per topic and rack class, spare units, one source per pool),
    refused whole when it would overrun the budget; the flow, kept only when
    strictly cheaper; the holders read back from it; a repair when the shift
    broke balance, else the new assignment applied.
    """
    counts = _target_counts(state, losers, gainer, droppers)
    if counts is None:
        return False
    big = state.prep.cross_price or state.n_parts + 1
    pooled = pools_of(state, big)
    pools, current = pooled.pools, pooled.current
    plain = not losers and gainer < 0 and not counts.drops
    # A proof of minimal cross-rack count holds only for the plain objective over every partition.
    provable = plain and not state.keep_owned and not state.prep.cross_price
    if _nothing_to_gain(state, current, big, plain, provable):
        return False
    net = _Network(counts)
    _members_and_hubs(state, net)
    if (losers and gainer < 0) or counts.drops:
        _spare_units(state, net, losers, banned, gainer)
    if _refused(state, net, pooled, budget, not provable and _floor_cost(state, net, pools, big) >= current):
        return False
    pool_edges = _pool_edges(state, net, pools, big)
    if budget is not None:
        budget.edges -= len(net.graph.edges)  # counted exactly above, so it fits
    try:
        result = _solve(net.graph, budget, None if provable else current)
    except InfeasibleFlow:
        return False
    if result is None or result.cost >= current:
        if provable:  # proven: no balanced assignment at these counts has fewer cross-rack partitions
            state.min_cross_holder = list(state.holder)
        return False
    new_holder = _read_back(state, net, pools, pool_edges, result.flow)
    if losers or counts.drops:
        repair = _imbalance(state, new_holder, counts.cnt)
        if repair is not None:
            return repair
    _apply(state, new_holder)
    return True


def _solve(graph: FlowGraph, budget: Budget | None, cutoff: int | None) -> FlowResult | None:
    """The flow if it costs less than ``cutoff`` (None: solved in full), else None, through the run's
    memo (a graph solved before is not solved again).

    Only a strictly cheaper flow is kept, so the solver may stop once it cannot be; the provable flow
    is solved in full, since its cost is the proof.
    """
    return (FlowMemo() if budget is None else budget.memo).solve_below(graph, cutoff)


@record(frozen=True)
class _Counts:
    """The counts a :func:`place` flow must meet: per member, each topic's least-loaded subscriber's,
    and the droppers that may hold one fewer."""

    cnt: list[int]
    min_sub: list[int]
    drops: set[int]


def _target_counts(
    state: GeneralState, losers: frozenset[int], gainer: int, droppers: frozenset[int]
) -> _Counts | None:
    """Current counts, one fewer per loser and as many more for ``gainer``; None if a loser holds nothing."""
    cnt = list(state.cnt)
    for a in losers:
        cnt[a] -= 1
        if cnt[a] < 0:
            return None
    if gainer >= 0:
        cnt[gainer] += len(losers)
    at = cnt.__getitem__
    min_sub = [min(map(at, subs)) if subs else 0 for subs in state.tm]
    drops = {i for i in droppers if cnt[i] > 0 and i not in losers}
    return _Counts(cnt, min_sub, drops)


def _nothing_to_gain(state: GeneralState, current: int, big: int, plain: bool, provable: bool) -> bool:
    """Whether no flow can be cheaper than ``current``, so none is built (a proof is recorded when one holds)."""
    holder = state.holder
    if plain and not current:
        state.min_cross_holder = list(holder) if provable else state.min_cross_holder
        return True
    if provable and current % big == 0 and holder == state.min_cross_holder:
        # Nothing to gain: nothing cross-rack and nothing moved, or nothing moved and the cross-rack
        # count proven the fewest at these counts (an earlier flow at this very holder).
        state.min_cross_holder = list(holder)
        return True
    return not current


@record()
class _Network:
    """The flow network of one :func:`place`, its nodes created on first use in a fixed order."""

    counts: _Counts
    graph: FlowGraph = field(default_factory=FlowGraph)
    member_node: dict[int, int] = field(default_factory=dict)
    hubs: dict[tuple[int, int], int] = field(default_factory=dict)
    node_member: dict[int, int] = field(default_factory=dict)
    spare_of: dict[int, int] = field(default_factory=dict)  # growing member -> its spare-unit node
    grows: dict[int, set[int]] = field(default_factory=dict)  # growing member -> topics it may grow in
    room: int = 0  # capacity of each spare-unit edge
    hub_edges: int = 0  # the edges before the pools' (every edge out of a hub among them)
    #: per topic, its hubs' classes (ascending), once all are made
    classes: list[tuple[int, ...]] | None = None

    def topic_classes(self, n_topics: int) -> list[tuple[int, ...]]:
        """Per topic, the classes of its hubs, ascending (asked once every hub is made)."""
        if self.classes is None:
            per: list[list[int]] = [[] for _ in range(n_topics)]
            for t, g in sorted(self.hubs):
                per[t].append(g)
            self.classes = [tuple(gs) for gs in per]
        return self.classes

    def member(self, i: int) -> int:
        """Member ``i``'s node, demanding its count (one less for a dropper, which may send it spare)."""
        v = self.member_node.get(i)
        if v is None:
            c = self.counts
            v = self.member_node[i] = self.graph.add_node(-c.cnt[i] + (1 if i in c.drops else 0))
        return v


def _members_and_hubs(state: GeneralState, net: _Network) -> None:
    """Each member behind the hubs of the topics it may hold at its count (:func:`.general_nodes.members_and_hubs`:
    at most one above the topic's least-loaded subscriber, the contract's balance rule at fixed counts),
    the nodes made as :meth:`_Network.member` and the hubs as ``net.hubs`` record them."""
    c, graph = net.counts, net.graph
    net.node_member = members_and_hubs(
        state.n_topics,
        state.n,
        state.tm,
        c.cnt,
        c.min_sub,
        c.drops,
        state.cls,
        graph.supply,
        graph.edges,
        net.hubs,
        net.member_node,
    )


def _spare_units(
    state: GeneralState, net: _Network, losers: frozenset[int], banned: frozenset[int], gainer: int
) -> None:
    """Spare units for members at the bottom of a topic: the count shift's receivers, chosen by the flow
    (:func:`.general_spare.spare_units`, which appends to the graph's lists and fills the network's dicts
    as ``add_node``, ``add_edge`` and :meth:`_Network.member` would)."""
    c, graph = net.counts, net.graph
    net.room = spare_units(
        c.drops,
        losers,
        banned,
        gainer,
        c.cnt,
        c.min_sub,
        state.mt,
        state.cls,
        graph.supply,
        graph.edges,
        net.hubs,
        net.member_node,
        net.spare_of,
        net.grows,
        net.node_member,
    )


def _refused(
    state: GeneralState, net: _Network, pooled: Pooled, budget: Budget | None, floored: bool
) -> bool:
    """Whether :func:`place` builds no flow: the budget cannot pay for it (then it is spent: not even one
    more flow of this size fits, the search stops here), or ``floored`` (see :func:`_floor_cost`: it
    could not be cheaper; its edges are charged as if built, so the search goes on exactly as before)."""
    if budget is None:
        return floored
    size = _pool_edge_count(state, net, pooled)
    if size > budget.edges:
        budget.edges = 0
        return True
    if floored:
        budget.edges -= size
    return floored


def _floor_cost(state: GeneralState, net: _Network, pools: Pools, big: int) -> int:
    """A lower bound on the flow's cost (:func:`.general_floor.floor_cost`: every partition at the cheapest
    edge its pool will have).  When it already reaches the current cost the flow could not be strictly
    cheaper, so :func:`place` builds none; the provable plain flow is always built, since its result
    also records the proof."""
    c = net.counts
    return floor_cost(
        pools,
        c.cnt,
        c.min_sub,
        net.spare_of,
        net.grows,
        state.crossk,
        state.cls,
        net.topic_classes(state.n_topics),
        big,
        state.flow_cache.fewest,
    )


def _pool_edge_count(state: GeneralState, net: _Network, pooled: Pooled) -> int:
    """The edges the network will have with its pools, counted before they are built: a graph the
    budget refuses costs nothing more.  Each pool not pinned has one edge per hub of its topic, each
    with an owner one back to it while it may hold the topic and one to its spare-unit node while it
    may grow in it: counted per topic and per (owner, topic), not per pool."""
    cnt, min_sub, spare_of, grows = net.counts.cnt, net.counts.min_sub, net.spare_of, net.grows
    classes = net.topic_classes(state.n_topics)
    total = len(net.graph.edges) + sum([u * len(c) for u, c in zip(pooled.unpinned, classes, strict=True)])
    for o, t, m in pooled.owned:
        total += m * ((0 < cnt[o] <= min_sub[t] + 1) + (o in spare_of and t in grows[o]))
    return total


def _pool_edges(state: GeneralState, net: _Network, pools: Pools, big: int) -> PoolEdges:
    """One source per pool: an edge back to its owner (no move) and one to each hub of its topic
    (a move when owned), each costing ``BIG`` per cross-rack partition (:func:`.general_edges.pool_edges`,
    which appends to the graph's lists the nodes and edges ``add_node`` / ``add_edge`` would make)."""
    classes = net.topic_classes(state.n_topics)
    hubs = net.hubs
    hub_nodes = [[hubs[(t, g)] for g in gs] for t, gs in enumerate(classes)]
    net.hub_edges = len(net.graph.edges)
    return pool_edges(
        pools,
        net.graph.edges,
        net.graph.supply,
        net.counts.cnt,
        net.counts.min_sub,
        net.member_node,
        net.spare_of,
        net.grows,
        net.room,
        hub_nodes,
        state.crossk,
        state.cls,
        classes,
        big,
        state.flow_cache.hub_costs,
    )


def _read_back(
    state: GeneralState, net: _Network, pools: Pools, pool_edges: PoolEdges, flow: list[int]
) -> list[int]:
    """The holder of each partition from the flow (:func:`.general_readback.read_back`: the owner's own
    first, the rest dealt through the hubs to the members in the flow's proportions)."""
    graph = net.graph
    return read_back(
        state.holder, pools, pool_edges, flow, graph.edges, net.hub_edges, net.node_member, len(graph.supply)
    )


def _apply(state: GeneralState, new_holder: list[int]) -> None:
    """The new assignment into the state, its counts and indexes recomputed."""
    state.holder = new_holder
    state.cnt = [0] * state.n
    for i in new_holder:
        state.cnt[i] += 1
    state.reindex()


def _imbalance(state: GeneralState, holder: list[int], planned: list[int]) -> Repair | None:
    """None if ``holder`` is balanced, else how to repair the first violation (see the module docstring).

    A topic's partitions are numbered contiguously, so its highest holder is the first of the highest
    in partition order: ``max`` over its slice of the holder."""
    cnt = [0] * state.n
    for i in holder:
        cnt[i] += 1
    at = cnt.__getitem__
    off = state.prep.topic_offset
    for t, subs in enumerate(state.tm):
        if not subs or off[t] == off[t + 1]:
            continue
        h = max(holder[off[t] : off[t + 1]], key=at)
        low = min(map(at, subs))
        if cnt[h] > low + 1:
            dropped = [i for i in subs if cnt[i] == low and cnt[i] < planned[i]]
            if dropped:
                return Repair("keep", dropped[0])
            return Repair("ban", h) if cnt[h] > planned[h] else Repair("lose", h)
    return None
