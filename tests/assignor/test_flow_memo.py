"""A flow memo answers a graph solved before exactly as a new solve would, without solving it again.

The memos here keep graphs (``keep=True``); the settling's own keep them only where flows are solved
in Python (:data:`rackplan.assignor.flow.memo.KEEP`)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.assignor.flow import FlowGraph, FlowResult, InfeasibleFlow, mincost
from rackplan.assignor.flow.memo import FlowMemo
from tests.assignor.test_flow import flow_problems
from tests.calls import counting


def _graph(edges: list[tuple[int, int, int, int]], supply: list[int]) -> FlowGraph:
    g = FlowGraph()
    g.supply, g.edges = list(supply), list(edges)
    return g


def _answer(memo: FlowMemo, graph: FlowGraph, cutoff: int | None) -> FlowResult | str | None:
    """The memo's answer; with a cut-off, infeasible and "not below it" are one answer (no flow below
    it), as the solver's contract allows either."""
    try:
        return memo.solve_below(graph, cutoff)
    except InfeasibleFlow:
        return "infeasible" if cutoff is None else None


@settings(max_examples=150, deadline=None)
@given(
    problem=flow_problems(),
    cutoffs=st.lists(st.one_of(st.none(), st.integers(0, 60)), min_size=1, max_size=6),
)
def test_the_memo_answers_as_the_solver_does(
    problem: tuple[int, list[tuple[int, int, int, int]], list[int]], cutoffs: list[int | None]
) -> None:
    """Any sequence of cut-offs on one graph, asked of one memo: each answer is the solver's (a memo
    that keeps nothing)."""
    _n, edges, supply = problem
    memo = FlowMemo(keep=True)
    for cutoff in cutoffs:
        assert _answer(memo, _graph(edges, supply), cutoff) == _answer(
            FlowMemo(keep=False), _graph(edges, supply), cutoff
        )
    assert memo.solved + memo.reused == len(cutoffs)


def test_a_graph_is_solved_once(monkeypatch: pytest.MonkeyPatch) -> None:
    counted = counting(monkeypatch, mincost, "_phases")  # every solve, cut off or not
    edges, supply = [(0, 2, 1, 5), (0, 1, 2, 1), (1, 2, 2, 1)], [3, 0, -3]  # costs 9
    memo = FlowMemo(keep=True)
    full = memo.solve_below(_graph(edges, supply), None)
    assert full is not None and full.cost == 9
    assert memo.solve_below(_graph(edges, supply), 10) == full  # an equal graph, built anew
    assert memo.solve_below(_graph(edges, supply), 9) is None
    assert (counted[0], memo.solved, memo.reused) == (1, 1, 2)


def test_a_cut_off_answer_is_reused_only_below_its_cutoff(monkeypatch: pytest.MonkeyPatch) -> None:
    counted = counting(monkeypatch, mincost, "_phases")  # every solve, cut off or not
    g = _graph([(0, 2, 1, 5), (0, 1, 2, 1), (1, 2, 2, 1)], [3, 0, -3])
    memo = FlowMemo(keep=True)
    assert memo.solve_below(g, 7) is None  # cost 9 >= 7
    assert memo.solve_below(g, 5) is None  # known: at least 7
    assert counted[0] == 1
    again = memo.solve_below(g, 12)  # 12 is above what is known: solved
    assert again is not None and again.cost == 9 and counted[0] == 2


def test_infeasible_is_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    counted = counting(monkeypatch, mincost, "_phases")  # every solve, cut off or not
    memo = FlowMemo(keep=True)
    for _ in range(3):
        with pytest.raises(InfeasibleFlow):
            memo.solve_below(_graph([(0, 1, 1, 1)], [2, -2]), None)
    assert counted[0] == 1


def test_a_full_memo_keeps_nothing_more_and_still_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    counted = counting(monkeypatch, mincost, "_phases")  # every solve, cut off or not
    memo = FlowMemo(room=2, keep=True)  # room for the first graph's two edges only
    small, big = [(0, 1, 2, 1), (1, 2, 2, 1)], [(0, 2, 1, 5), (0, 1, 2, 1), (1, 2, 2, 1)]
    assert memo.solve_below(_graph(small, [2, 0, -2]), None) == memo.solve_below(
        _graph(small, [2, 0, -2]), None
    )
    first = memo.solve_below(_graph(big, [3, 0, -3]), None)
    assert memo.solve_below(_graph(big, [3, 0, -3]), None) == first
    assert (counted[0], len(memo.seen), memo.room) == (3, 1, 0)


def test_a_memo_keeps_graphs_only_where_flows_are_solved_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the compiled core a solve costs less than the memo's key: the settling's memos solve again."""
    assert FlowMemo().keep is (not mincost.COMPILED)
    counted = counting(monkeypatch, mincost, "_phases")  # every solve, cut off or not
    memo = FlowMemo(keep=False)
    edges, supply = [(0, 2, 1, 5), (0, 1, 2, 1), (1, 2, 2, 1)], [3, 0, -3]
    answers = [memo.solve_below(_graph(edges, supply), cutoff) for cutoff in (None, 10, 9)]
    assert [a and a.cost for a in answers] == [9, 9, None]
    with pytest.raises(InfeasibleFlow, match="only 1 of 2 units can be routed"):  # the solver's own error
        memo.solve_below(_graph([(0, 1, 1, 1)], [2, -2]), None)
    assert (counted[0], memo.solved, memo.reused, memo.seen) == (4, 4, 0, {})
