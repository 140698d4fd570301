"""The min-cost flow engine against networkx on random graphs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.assignor.flow import (
    FlowGraph,
    FlowResult,
    InfeasibleFlow,
    min_cost_flow,
    min_cost_flow_below,
    min_cost_flow_phases,
    mincost,
)
from tests.invariants import assert_feasible_flow

Solver = Callable[[int, list[tuple[int, int, int, int]], list[int]], FlowResult]


@st.composite
def flow_problems(draw: st.DrawFn) -> tuple[int, list[tuple[int, int, int, int]], list[int]]:
    n = draw(st.integers(2, 8))
    edges = [
        (u, v, draw(st.integers(0, 6)), draw(st.integers(0, 9)))
        for u, v in draw(
            st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), min_size=1, max_size=24)
        )
        if u != v
    ]
    supply = [0] * n
    for a, b, k in draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.integers(1, 4)))):
        supply[a] += k
        supply[b] -= k
    return n, edges, supply


def networkx_cost(n: int, edges: list[tuple[int, int, int, int]], supply: list[int]) -> int | None:
    g = nx.MultiDiGraph()
    for v in range(n):
        g.add_node(v, demand=-supply[v])
    for i, (u, v, c, w) in enumerate(edges):
        g.add_edge(u, v, key=i, capacity=c, weight=w)
    try:
        return int(nx.min_cost_flow_cost(g))
    except nx.NetworkXUnfeasible:
        return None


@pytest.mark.parametrize("solver", [min_cost_flow, min_cost_flow_phases])
@settings(max_examples=300, deadline=None)
@given(problem=flow_problems())
def test_cost_matches_networkx(
    solver: Solver, problem: tuple[int, list[tuple[int, int, int, int]], list[int]]
) -> None:
    """Both engines: networkx's optimal cost (or infeasible), a feasible flow, and the same result twice."""
    n, edges, supply = problem
    expected = networkx_cost(n, edges, supply)
    try:
        result = solver(n, edges, supply)
    except InfeasibleFlow:
        assert expected is None
        return
    assert result.cost == expected
    assert_feasible_flow(n, edges, supply, result)
    assert solver(n, edges, supply) == result  # deterministic


def test_rejects_bad_input() -> None:
    with pytest.raises(InfeasibleFlow):
        min_cost_flow(2, [(0, 1, 5, 1)], [1, 0])
    with pytest.raises(InfeasibleFlow):
        min_cost_flow(2, [(0, 1, 1, 1)], [2, -2])
    with pytest.raises(ValueError):
        min_cost_flow(2, [(0, 1, 1, -1)], [1, -1])
    with pytest.raises(ValueError):
        min_cost_flow(3, [(0, 1, 1, 1)], [1, -1])


def test_prefers_cheaper_parallel_path() -> None:
    # 0 -> 1 directly costs 5; 0 -> 2 -> 1 costs 2 but carries only 3 units.
    r = min_cost_flow(3, [(0, 1, 10, 5), (0, 2, 3, 1), (2, 1, 3, 1)], [5, -5, 0])
    assert r.flow == [2, 3, 3]
    assert r.cost == 2 * 5 + 3 * 2


# --- min_cost_flow_phases (primal-dual: bucket-queue Dijkstra, blocking flows with sink-side levels)


@settings(max_examples=100, deadline=None)
@given(flow_problems(), st.integers(1, 10**9))
def test_phases_with_large_costs(
    problem: tuple[int, list[tuple[int, int, int, int]], list[int]], scale: int
) -> None:
    """Distances far apart (one bucket per distinct distance) still give the exact optimum."""
    n, edges, supply = problem
    big = [(u, v, c, w * scale + (u * 7 + v) % 5) for u, v, c, w in edges]
    try:
        want = min_cost_flow(n, big, supply)
    except InfeasibleFlow:
        with pytest.raises(InfeasibleFlow):
            min_cost_flow_phases(n, big, supply)
        return
    got = min_cost_flow_phases(n, big, supply)
    assert got.cost == want.cost
    assert_feasible_flow(n, big, supply, got)


def test_phases_routes_many_units_over_few_paths() -> None:
    # 1000 tasks to 10 clients of 100 each; task k is free on client k % 10, 1 elsewhere.
    n_t, n_c = 1000, 10
    edges = [(t, n_t + c, 1, 0 if t % n_c == c else 1) for t in range(n_t) for c in range(n_c)]
    supply = [1] * n_t + [-(n_t // n_c)] * n_c
    r = min_cost_flow_phases(n_t + n_c, edges, supply)
    assert r.cost == 0
    assert_feasible_flow(n_t + n_c, edges, supply, r)


@settings(max_examples=200, deadline=None)
@given(problem=flow_problems())
def test_flow_graph_builds_the_problem_it_is_given(
    problem: tuple[int, list[tuple[int, int, int, int]], list[int]],
) -> None:
    """The builder's graph, node by node and edge by edge, is solved as its lists are: same cost, same flow."""
    n, edges, supply = problem
    g = FlowGraph()
    nodes = [g.add_node(b) for b in supply]
    assert nodes == list(range(n)) and g.num_nodes == n
    assert [g.add_edge(*e) for e in edges] == list(range(len(edges)))
    assert g.edges == edges and g.supply == supply
    for solve, reference in ((g.solve, min_cost_flow_phases), (g.solve_by_paths, min_cost_flow)):
        try:
            expected = reference(n, edges, supply)
        except InfeasibleFlow:
            with pytest.raises(InfeasibleFlow):
                solve()
            continue
        assert solve() == expected


# --- min_cost_flow_below (the same phases, stopped once the flow cannot cost less than a cut-off)


@settings(max_examples=300, deadline=None)
@given(problem=flow_problems(), cutoff=st.integers(0, 80))
def test_below_is_the_same_flow_or_none(
    problem: tuple[int, list[tuple[int, int, int, int]], list[int]], cutoff: int
) -> None:
    """Below the cut-off: exactly min_cost_flow_phases' flow; at or above it (or infeasible): no flow."""
    n, edges, supply = problem
    try:
        full: FlowResult | None = min_cost_flow_phases(n, edges, supply)
    except InfeasibleFlow:
        full = None
    try:
        got = min_cost_flow_below(n, edges, supply, cutoff)
    except InfeasibleFlow:
        assert full is None
        return
    assert got == (full if full is not None and full.cost < cutoff else None)
    g = FlowGraph()
    g.supply, g.edges = list(supply), list(edges)
    if full is not None:
        assert g.solve_below(cutoff) == got


def _phases_run(monkeypatch: pytest.MonkeyPatch, cutoff: int | None) -> tuple[FlowResult | None, int, int]:
    """Three units: two over a path of cost 2, the third only over the direct edge of cost 5 (9 in all);
    the result, then the Dijkstra runs and the blocking flows the solver did."""
    runs = [0, 0]
    dijkstra, blocking = mincost._dijkstra, mincost._blocking_flows

    def counted_dijkstra(*args: Any) -> tuple[list[int], int]:
        runs[0] += 1
        return dijkstra(*args)

    def counted_blocking(*args: Any) -> int:
        runs[1] += 1
        return blocking(*args)

    monkeypatch.setattr(mincost, "_dijkstra", counted_dijkstra)
    monkeypatch.setattr(mincost, "_blocking_flows", counted_blocking)
    edges = [(0, 2, 1, 5), (0, 1, 2, 1), (1, 2, 2, 1)]
    supply = [3, 0, -3]
    result = (
        min_cost_flow_phases(3, edges, supply)
        if cutoff is None
        else min_cost_flow_below(3, edges, supply, cutoff)
    )
    return result, runs[0], runs[1]


def test_below_stops_at_the_phase_that_reaches_the_cutoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Phase 1 costs 2 per unit (bound 3 * 2 = 6); after it, 4 spent and one unit left at 3 or more
    (bound 7); phase 2 costs 5 (bound 9).  A cut-off of 6 stops before any blocking flow, 7 before
    the second Dijkstra, 9 before the second blocking flow; 10 solves both phases."""
    full, dijkstras, blocking = _phases_run(monkeypatch, None)
    assert full is not None and (full.cost, dijkstras, blocking) == (9, 2, 2)
    assert _phases_run(monkeypatch, 6) == (None, 1, 0)
    assert _phases_run(monkeypatch, 7) == (None, 1, 1)
    assert _phases_run(monkeypatch, 9) == (None, 2, 1)
    assert _phases_run(monkeypatch, 10) == (full, 2, 2)
