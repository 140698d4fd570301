"""The compiled flow core (``assignor/flow/_flowcore.c``) returns what the Python phases return (issue 29).

The Python solver (:func:`rackplan.assignor.flow.mincost._phases_in_python`) is the oracle: on every
problem the core takes, the same cost, the same flow on every edge, the same None under a cut-off and
the same exception with the same message; networkx checks the cost.  Outside the core's 64-bit domain
the Python solves it, and where a C compiler exists the core must have been built (CI never runs the
fallback by accident).
"""

from __future__ import annotations

import shutil
import sysconfig
from typing import TYPE_CHECKING

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rackplan.assignor.flow import FlowResult, InfeasibleFlow, min_cost_flow, mincost
from tests.assignor.test_flow import networkx_cost
from tests.calls import counting

if TYPE_CHECKING:
    from rackplan.assignor.flow.compiled import Core

Edge = tuple[int, int, int, int]
Problem = tuple[int, list[Edge], list[int]]


def _compiler() -> str | None:
    cc = sysconfig.get_config_var("CC")
    return shutil.which(cc.split()[0]) if cc else None


def compiled_core() -> Core:
    """The compiled core; a failure where a C compiler exists but the core was not built (``pip install``
    builds it as optional: a failed build would leave the Python solver, silently)."""
    if mincost._core is None:
        if _compiler() is None:
            pytest.skip("no C compiler: the Python solver is the one installed")
        pytest.fail("a C compiler exists but the flow core was not built: reinstall (make .venv/.installed)")
    return mincost._core


def test_the_core_is_built_and_used_where_a_compiler_exists(core: Core) -> None:
    assert mincost.COMPILED
    status, cost, flow = core.solve(3, [(0, 2, 1, 5), (0, 1, 2, 1), (1, 2, 2, 1)], [3, 0, -3], None)
    assert (status, cost, flow) == (core.SOLVED, 9, [1, 2, 2])


def _python(problem: Problem, cutoff: int | None) -> FlowResult | tuple[type, str] | None:
    try:
        return mincost._phases_in_python(mincost._Residual(*problem), cutoff)
    except (ValueError, IndexError, TypeError) as e:
        return type(e), str(e)


def _compiled(problem: Problem, cutoff: int | None) -> FlowResult | tuple[type, str] | None:
    try:
        return mincost._phases(mincost._Problem(*problem), cutoff)
    except (ValueError, IndexError, TypeError) as e:
        return type(e), str(e)


@st.composite
def problems(draw: st.DrawFn) -> Problem:
    """Graphs with parallel edges, self-loops, zero capacities, zero supplies and ties (costs 0-3 mostly);
    now and then an unbalanced supply or a negative capacity or cost (the errors)."""
    n = draw(st.integers(1, 30))
    node = st.integers(0, n - 1)
    cost = st.one_of(st.integers(0, 3), st.integers(0, 1000))
    edges = draw(st.lists(st.tuples(node, node, st.integers(0, 6), cost), max_size=120))
    supply = [0] * n
    for a, b, k in draw(st.lists(st.tuples(node, node, st.integers(1, 5)), max_size=n)):
        supply[a] += k
        supply[b] -= k
    if edges and draw(st.integers(0, 19)) == 0:
        i = draw(st.integers(0, len(edges) - 1))
        u, v, c, w = edges[i]
        edges[i] = (u, v, -c - 1, w) if draw(st.booleans()) else (u, v, c, -w - 1)
    if draw(st.integers(0, 19)) == 0:
        supply[draw(node)] += draw(st.sampled_from([-1, 1]))
    return n, edges, supply


@settings(max_examples=600, deadline=None)
@given(problem=problems(), data=st.data())
@example(problem=(1, [(0, 0, 3, 0)], [0]), data=None)  # a self-loop, nothing to route
@example(problem=(2, [], [1, -1]), data=None)  # infeasible at once
def test_the_core_returns_the_python_solvers_flow(problem: Problem, data: st.DataObject | None) -> None:
    """Every edge's flow, the cost, None under a cut-off (above, at and below the optimum, and far off),
    the exception and its message: the same as the Python phases."""
    full = _python(problem, None)
    assert _compiled(problem, None) == full
    if isinstance(full, FlowResult):
        assert full.cost == networkx_cost(*problem)
        cutoffs = [full.cost - 1, full.cost, full.cost + 1, 0, -(2**70), 2**70]
    else:
        cutoffs = [0, 5, 2**70]
    if data is not None:
        cutoffs.append(data.draw(st.integers(-5, 3000), label="cutoff"))
    for cutoff in cutoffs:
        assert _compiled(problem, cutoff) == _python(problem, cutoff), cutoff


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(2, 8),
    data=st.data(),
    cutoff=st.one_of(st.none(), st.integers(0, 2**62), st.just(2**70)),
)
def test_the_core_is_exact_near_its_bound(n: int, data: st.DataObject, cutoff: int | None) -> None:
    """Costs up to 2**57 on at most eight edges (their sum below 2**60) and capacities up to 2**20: the
    core solves them (no fallback) and returns what the Python returns."""
    node = st.integers(0, n - 1)
    edges = data.draw(
        st.lists(
            st.tuples(node, node, st.integers(0, 2**20), st.integers(0, 2**57 - 1)), min_size=1, max_size=8
        )
    )
    supply = [0] * n
    a, b, k = data.draw(st.tuples(node, node, st.integers(1, 3)))
    supply[a] += k
    supply[b] -= k
    problem: Problem = (n, edges, supply)
    if mincost._core is not None:
        assert mincost._core.solve(*problem, cutoff)[0] != mincost._core.FALLBACK
    assert _compiled(problem, cutoff) == _python(problem, cutoff)


def _assignment_like(seed: int) -> Problem:
    """The shape the count-shift search solves: sources -> pools -> members -> sink, many equal costs."""
    import random

    rng = random.Random(seed)
    n_src, n_pool, n_mem = rng.randint(2, 12), rng.randint(3, 30), rng.randint(3, 25)
    n = n_src + n_pool + n_mem + 1
    sink = n - 1
    edges: list[Edge] = []
    for s in range(n_src):
        for p in rng.sample(range(n_pool), rng.randint(1, n_pool)):
            edges.append((s, n_src + p, rng.randint(0, 9), rng.randint(0, 2)))
    for p in range(n_pool):
        for m in rng.sample(range(n_mem), rng.randint(1, n_mem)):
            edges.append((n_src + p, n_src + n_pool + m, rng.randint(1, 9), rng.randint(0, 3)))
    for m in range(n_mem):
        edges.append((n_src + n_pool + m, sink, rng.randint(1, 8), 0))
    supply = [0] * n
    for s in range(n_src):
        supply[s] = rng.randint(0, 8)
    supply[sink] = -sum(supply)
    return n, edges, supply


@pytest.mark.parametrize("seed", range(40))
def test_the_core_takes_the_same_paths_on_assignment_shaped_graphs(seed: int) -> None:
    """Many optima of equal cost: only the Python's own arc order picks the one both return."""
    problem = _assignment_like(seed)
    full = _python(problem, None)
    assert _compiled(problem, None) == full
    if isinstance(full, FlowResult):
        for cutoff in (full.cost, full.cost + 1):
            assert _compiled(problem, cutoff) == _python(problem, cutoff)


BIG = 2**60


@pytest.mark.parametrize(
    ("edges", "supply", "compiled"),
    [
        ([(0, 1, 2, BIG // 2 - 1), (0, 1, 2, BIG // 2)], [1, -1], True),  # costs sum to 2**60 - 1
        ([(0, 1, 2, BIG // 2), (0, 1, 2, BIG // 2)], [1, -1], False),  # to 2**60
        ([(0, 1, 2**40, 2**21 - 2)], [2**40, -(2**40)], True),  # 2**40 units x (costs + 1) < 2**61
        ([(0, 1, 2**40, 2**21)], [2**40, -(2**40)], False),  # > 2**61
        ([(0, 1, BIG, 0)], [1, -1], False),  # a capacity of 2**60
        ([(0, 1, 1, 3**50)], [1, -1], False),  # exact-scaled bytes/s: any size
    ],
)
def test_the_python_solves_what_is_beyond_the_cores_bound(
    monkeypatch: pytest.MonkeyPatch, core: Core, edges: list[Edge], supply: list[int], compiled: bool
) -> None:
    """Capacities and supplies below 2**60, costs summing below 2**60, the total supply times (that sum
    + 1) below 2**61: the core; anything larger is handed back and solved in Python, with the same flow."""
    problem: Problem = (2, edges, supply)
    status = core.solve(*problem, None)[0]
    assert status == (core.SOLVED if compiled else core.FALLBACK)
    calls = counting(monkeypatch, mincost, "_phases_in_python")  # the fallback
    got = mincost.min_cost_flow_phases(*problem)
    assert calls[0] == (0 if compiled else 1)
    assert got == min_cost_flow(*problem)


@pytest.mark.parametrize(
    ("num_nodes", "edges", "supply", "error"),
    [
        (3, [(0, 1, 1, 1)], [1, -1], "supply must have one entry per node"),
        (2, [(0, 1, 1, 1)], [1, 0], "supplies sum to 1, not 0"),
        (2, [(0, 1, -1, 1)], [1, -1], "edge 0->1: capacity and cost must be non-negative"),
        (2, [(0, 1, 1, -1)], [1, -1], "edge 0->1: capacity and cost must be non-negative"),
        (2, [(0, 1, 1, 1)], [2, -2], "only 1 of 2 units can be routed"),
    ],
)
def test_bad_problems_raise_the_python_solvers_errors(
    num_nodes: int, edges: list[Edge], supply: list[int], error: str
) -> None:
    with pytest.raises(ValueError) as python:
        mincost._phases_in_python(mincost._Residual(num_nodes, edges, supply), None)
    with pytest.raises(ValueError) as compiled:
        mincost.min_cost_flow_phases(num_nodes, edges, supply)
    assert (type(compiled.value), str(compiled.value)) == (type(python.value), str(python.value))
    assert str(compiled.value) == error
    assert isinstance(compiled.value, InfeasibleFlow) == ("sum" in error or "routed" in error)


def test_a_replaced_piece_of_the_python_phases_sees_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller that counts the Python's Dijkstra runs (tests/assignor/test_flow.py) gets the Python."""
    runs = counting(monkeypatch, mincost, "_dijkstra")
    assert mincost.min_cost_flow_phases(3, [(0, 2, 1, 5), (0, 1, 2, 1), (1, 2, 2, 1)], [3, 0, -3]).cost == 9
    assert runs[0] == 2
