"""The count-shift flows' kept pools and hub costs (``general_pools.FlowCache``) change no graph, and pool once per holder.

Issue 29: building each count-shift graph (pooling the partitions, the cheapest edge of each pool,
each hub edge's cost) was about half of a cliff group's CPU, mostly the same work at one holder, call
after call.  The state now keeps it; these tests hold the kept answers to what a new pass gives.
"""

from __future__ import annotations

import weakref
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.assignor.consumer.sticky import assign, general, general_flow, general_pools, general_shift
from rackplan.assignor.consumer.sticky.general_flow import Repair, place
from rackplan.assignor.consumer.sticky.general_pools import FlowCache
from rackplan.assignor.consumer.sticky.general_state import GeneralState
from rackplan.assignor.flow import FlowResult
from rackplan.assignor.flow.memo import FlowMemo
from rackplan.assignor.model import Cluster, ConsumerGroup, ConsumerPlan
from tests.assignor.test_sticky_work import one_joins, seven_racks

#: Every graph a run asked the solver for: supplies, edges, cut-off, and what came back.
Solved = list[tuple[list[int], list[tuple[int, int, int, int]], int | None, FlowResult | None]]


def graphs_and_plan(cluster: Cluster, group: ConsumerGroup, fresh: bool) -> tuple[Solved, ConsumerPlan]:
    """The graphs solved and the plan, with the state's cache kept (``fresh`` False) or emptied before
    every :func:`place` (each call works everything out anew, as before the cache)."""
    solved: Solved = []
    solve = FlowMemo.solve_below

    def recorded(memo: FlowMemo, graph: Any, cutoff: int | None) -> FlowResult | None:
        result = solve(memo, graph, cutoff)
        solved.append((list(graph.supply), list(graph.edges), cutoff, result))
        return result

    def emptied(state: GeneralState, *args: Any, **kwargs: Any) -> bool | Repair:
        state.flow_cache = FlowCache()
        return place(state, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FlowMemo, "solve_below", recorded)
        if fresh:
            patch.setattr(general_shift, "place", emptied)
        plan = assign(cluster, group)
    return solved, plan


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), n_members=st.integers(6, 24), n_parts=st.integers(30, 150))
def test_kept_pools_and_hub_costs_build_the_very_graphs_of_a_fresh_pass(
    seed: int, n_members: int, n_parts: int
) -> None:
    """Unequal seven-rack groups, one member joining: the same graphs, in the same order, the same
    flows and the same plan whether the cache is kept or emptied before every flow."""
    cluster, members = seven_racks(seed, n_members, n_parts)
    group = one_joins(cluster, members)
    kept, plan = graphs_and_plan(cluster, group, fresh=False)
    fresh, fresh_plan = graphs_and_plan(cluster, group, fresh=True)
    assert kept == fresh
    assert plan == fresh_plan


def test_the_cliff_shape_pools_its_partitions_once_per_holder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorded cliff seed: ``place`` is called thousands of times; the partitions are pooled again
    only where a state reaches a holder other than its last call's, far fewer."""
    last: weakref.WeakKeyDictionary[GeneralState, list[int]] = weakref.WeakKeyDictionary()
    calls, new_holders, pooled = [0], [0], [0]

    def seen(state: GeneralState, *args: Any, **kwargs: Any) -> bool | Repair:
        calls[0] += 1
        if last.get(state) != state.holder:
            new_holders[0] += 1
            last[state] = list(state.holder)
        return place(state, *args, **kwargs)

    build = general_pools.Pooled

    def counted(*args: Any) -> general_pools.Pooled:
        pooled[0] += 1
        return build(*args)

    monkeypatch.setattr(general_shift, "place", seen)
    monkeypatch.setattr(general, "place", seen)
    monkeypatch.setattr(general_pools, "Pooled", counted)
    cluster, members = seven_racks(41, 23, 148)
    assign(cluster, one_joins(cluster, members))
    assert pooled[0] == new_holders[0], (pooled[0], new_holders[0])
    assert pooled[0] * 10 < calls[0], (pooled[0], calls[0])


def test_a_graphs_edges_are_counted_exactly_before_it_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget charges a refused or floored graph by its count (per topic and per owner and topic,
    from the kept pools): on the cliff seed every graph built has exactly the edges counted for it."""
    pairs: list[tuple[int, int]] = []
    count, build = general_flow._pool_edge_count, general_flow._pool_edges

    def recorded_build(state: GeneralState, net: Any, pools: Any, big: int) -> Any:
        want = count(state, net, general_pools.pools_of(state, big))
        built = build(state, net, pools, big)
        pairs.append((want, len(net.graph.edges)))
        return built

    monkeypatch.setattr(general_flow, "_pool_edges", recorded_build)
    cluster, members = seven_racks(41, 23, 148)
    assign(cluster, one_joins(cluster, members))
    assert len(pairs) > 100
    assert all(want == got for want, got in pairs), [p for p in pairs if p[0] != p[1]][:5]
