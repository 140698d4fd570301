"""The compiled floor of a count-shift flow (``_flowcore.floor_cost``) is the Python's (issue 29).

:func:`rackplan.assignor.consumer.sticky.general_floor.floor_cost_py` is the oracle: on every input the
core takes, the same int; on every input it does not (an owner or topic outside the lists, a mask or
class the Python would miss, a price past the core's bound, a wrong type), None, so
:func:`~.general_floor.floor_cost` answers in Python with the Python's own result or error.  And the
floor is a floor: never above the cost the flow it stands for is solved at.
"""

from __future__ import annotations

import contextlib
import copy
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.assignor.consumer.sticky import assign, general_flow
from rackplan.assignor.consumer.sticky.general_floor import floor_cost, floor_cost_py
from rackplan.assignor.flow import FlowGraph, FlowResult, InfeasibleFlow
from tests.assignor.general_core import RARELY
from tests.assignor.test_sticky_work import one_joins, seven_racks

if TYPE_CHECKING:
    from rackplan.assignor.flow.compiled import Core


@st.composite
def inputs(draw: st.DrawFn) -> tuple[Any, ...]:
    """Arguments shaped like a count-shift flow's (pools in key order, counts, a topic's minimum, members
    that may grow in some topics, crossings per class and mask, each topic's hub classes), now and then
    off that shape: an owner past the counts, a mask no class knows, a grower with no topics, a price past
    the core's bound, a topic's classes as a list."""
    n, n_topics, n_cls = draw(st.integers(1, 6)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    masks = [1, 2, 3, 5, 6]
    keys = draw(
        st.sets(
            st.tuples(
                st.integers(-1, n - 1), st.integers(0, n_topics - 1), st.sampled_from(masks), st.booleans()
            ),
            max_size=12,
        )
    )
    pools = [(key, [0] * draw(st.integers(1, 4))) for key in sorted(keys)]
    if draw(RARELY) and pools:
        (_o, t, k, pinned), lst = pools[0]
        pools[0] = ((n, t, k, pinned), lst)  # an owner with no count: the Python's IndexError
    cnt = [draw(st.integers(-1, 5)) for _ in range(n)]
    min_sub = [draw(st.integers(0, 4)) for _ in range(n_topics)]
    spare_of = {d: 100 + d for d in draw(st.sets(st.integers(0, n - 1), max_size=3))}
    grows = {d: draw(st.sets(st.integers(0, n_topics - 1), max_size=n_topics)) for d in spare_of}
    if draw(RARELY) and grows:
        del grows[min(grows)]  # a grower without its topics: the Python's KeyError (when it asks)
    crossk = [{k: draw(st.integers(0, 2)) for k in masks} for _ in range(n_cls)]
    if draw(RARELY):
        del crossk[0][masks[0]]  # a mask the class does not know: the Python's KeyError
    cls = [draw(st.integers(0, n_cls - 1)) for _ in range(n)]
    classes = [
        tuple(sorted(draw(st.sets(st.integers(0, n_cls - 1), max_size=n_cls)))) for _ in range(n_topics)
    ]
    big = 2**40 if draw(RARELY) else draw(st.integers(0, 200))
    args: list[Any] = [pools, cnt, min_sub, spare_of, grows, crossk, cls, classes, big]
    if draw(RARELY):
        args[7] = [
            list(gs) for gs in classes
        ]  # not the tuples the core takes: the Python answers (a TypeError: its cache keys them)
    return tuple(args)


def _python(args: tuple[Any, ...]) -> Any:
    """The Python's floor, or its error's type."""
    try:
        return floor_cost_py(*copy.deepcopy(args))
    except (IndexError, KeyError, TypeError) as e:
        return type(e)


@settings(max_examples=500, deadline=None)
@given(args=inputs())
def test_the_core_gives_the_pythons_floor_or_nothing(core: Core, args: tuple[Any, ...]) -> None:
    want = _python(args)
    mine = copy.deepcopy(args)
    got = core.floor_cost(*mine)
    assert mine == args  # it reads, never writes
    if got is not None:  # else not taken: the Python decides
        assert got == want


@settings(max_examples=100, deadline=None)
@given(args=inputs())
def test_floor_cost_gives_the_pythons_answer_compiled_or_not(core: Core, args: tuple[Any, ...]) -> None:
    want = _python(args)
    try:
        got: Any = floor_cost(*copy.deepcopy(args))
    except (IndexError, KeyError, TypeError) as e:
        got = type(e)
    assert got == want


def test_the_core_takes_each_pools_cheapest_edge(core: Core) -> None:
    """Four pools: an owner that may hold its topic (its own class local), one that may only grow in it,
    one pinned with its owner, one unowned (a move costs nothing then); classes 0 and 1, big 10."""
    pools = [
        ((0, 0, 1, False), [7, 8]),  # owner 0 holds: 10 * 1 = 10 stay, hub 10 * 0 + 1 = 1: 1 each
        ((1, 0, 2, False), [9]),  # owner 1 grows in topic 0: stay 10 * 0 = 0, nothing added
        ((2, 1, 1, True), [5, 6, 4]),  # pinned, owner 2 may hold topic 1: 10 * 1 = 10 each
        ((-1, 1, 2, False), [3]),  # unowned: hub classes (0,): 10 * 1 = 10
    ]
    args: tuple[Any, ...] = (
        pools,
        [3, 9, 2],  # counts
        [2, 1],  # each topic's minimum
        {1: 50},
        {1: {0}},
        [{1: 0, 2: 1}, {1: 1, 2: 0}],  # crossk per class, per mask
        [1, 1, 1],
        [(0, 1), (0,)],
        10,
    )
    assert core.floor_cost(*args) == floor_cost_py(*args) == 2 * 1 + 0 + 3 * 10 + 10


def floors_and_costs(seed: int, n_members: int, n_parts: int) -> list[tuple[int, int]]:
    """Per count-shift flow solved with a cut-off while an unequal seven-rack group's joining member is
    assigned: its floor and its min cost, solved in full (infeasible flows left out: any floor holds)."""
    seen: list[tuple[int, int]] = []
    refused, solve = general_flow._refused, general_flow._solve
    last: list[Any] = []

    def watched_refused(state: Any, net: Any, pooled: Any, budget: Any, floored: bool) -> bool:
        last[:] = [state, net, pooled]
        return refused(state, net, pooled, budget, floored)

    def watched_solve(graph: FlowGraph, budget: Any, cutoff: int | None) -> FlowResult | None:
        if cutoff is not None:
            state, net, pooled = last
            big = state.prep.cross_price or state.n_parts + 1
            floor = general_flow._floor_cost(state, net, pooled.pools, big)
            with contextlib.suppress(InfeasibleFlow):  # infeasible: any floor holds
                seen.append((floor, graph.solve().cost))
        return solve(graph, budget, cutoff)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(general_flow, "_refused", watched_refused)
        patch.setattr(general_flow, "_solve", watched_solve)
        cluster, members = seven_racks(seed, n_members, n_parts)
        assign(cluster, one_joins(cluster, members))
    return seen


def test_the_cliff_groups_floors_are_below_every_flows_min_cost(core: Core) -> None:
    """The floor is a lower bound (so refusing a flow at it changes no plan), against the solver's own
    min cost of every flow the recorded cliff seed solves with a cut-off; and it is not a trivial one."""
    seen = floors_and_costs(41, 23, 148)
    assert seen and all(floor <= cost for floor, cost in seen), [x for x in seen if x[0] > x[1]][:5]
    assert sum(floor == cost for floor, cost in seen) > 0


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000), n_members=st.integers(6, 24), n_parts=st.integers(30, 150))
def test_floors_are_below_every_flows_min_cost_on_seven_rack_groups(
    core: Core, seed: int, n_members: int, n_parts: int
) -> None:
    seen = floors_and_costs(seed, n_members, n_parts)
    assert all(floor <= cost for floor, cost in seen), [x for x in seen if x[0] > x[1]][:5]
