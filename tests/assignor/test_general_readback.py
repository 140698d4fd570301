"""The compiled read-back (``_flowcore.read_back``) gives the holder the Python gives (issue 29).

:func:`rackplan.assignor.consumer.sticky.general_readback.read_back_py` is the oracle: on every input
the core takes, the same holder, partition for partition; on every input it does not (a deal left with
partitions, a flow off the edges, a hub outside the graph, a value not a plain int), None with its
arguments untouched, so :func:`~.general_readback.read_back` reads it back in Python with the Python's
own result or error.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.assignor.consumer.sticky.general_readback import read_back, read_back_py
from tests.assignor.general_core import RARELY

if TYPE_CHECKING:
    from rackplan.assignor.flow.compiled import Core


@st.composite
def split(draw: st.DrawFn, total: int, ways: int) -> list[int]:
    """``total`` units over ``ways`` edges (all of them lost when there is no edge)."""
    parts: list[int] = []
    for _ in range(ways - 1):
        parts.append(draw(st.integers(0, total - sum(parts))))
    return [*parts, total - sum(parts)] if ways else []


@st.composite
def inputs(draw: st.DrawFn) -> tuple[Any, ...]:
    """Read-back arguments shaped like a solved count-shift graph's (hub edges to member nodes first,
    then per pool its edges back to its owner and to its hubs, the flow conserved), now and then off
    that shape: a unit too many or lost, a negative flow, a hub outside the graph, a member reached
    through two nodes, a short flow."""
    n_members, n_parts = draw(st.integers(1, 5)), draw(st.integers(1, 14))
    holder = [draw(st.integers(0, n_members - 1)) for _ in range(n_parts)]
    nodes = iter(range(draw(st.integers(0, 5)), 10**6))
    hubs = [next(nodes) for _ in range(draw(st.integers(1, 4)))]
    node_member = {next(nodes): i for i in range(n_members)}
    member_nodes = list(node_member)
    if draw(st.booleans()):  # a spare-unit node: its member reached through two nodes
        spare = next(nodes)
        node_member[spare] = draw(st.integers(0, n_members - 1))
        member_nodes.append(spare)
    perm = draw(st.permutations(range(n_parts)))
    cuts = sorted(draw(st.lists(st.integers(1, max(1, n_parts - 1)), unique=True, max_size=n_parts - 1)))
    groups = [sorted(perm[a:b]) for a, b in zip([0, *cuts], [*cuts, n_parts], strict=True) if b > a]
    pools, plans, received = [], [], dict.fromkeys(hubs, 0)
    for t, lst in enumerate(groups):
        o = draw(st.integers(-1, n_members - 1))
        stays = draw(st.integers(0, 2)) if o >= 0 else 0
        its_hubs = draw(
            st.lists(st.sampled_from(hubs), unique=True, min_size=0 if stays else 1, max_size=len(hubs))
        )
        units = draw(split(len(lst), stays + len(its_hubs)))
        for hub, u in zip(its_hubs, units[stays:], strict=True):
            received[hub] += u
        pools.append(((o, t, draw(st.integers(0, 3)), False), lst))
        plans.append((o, lst, stays, its_hubs, units))
    edges: list[tuple[int, int, int, int]] = []
    flow: list[int] = []
    for hub in hubs:  # the hub edges, each hub's units over some of the member nodes
        reached = draw(st.lists(st.sampled_from(member_nodes), min_size=1, max_size=3))
        for v, f in zip(reached, draw(split(received[hub], len(reached))), strict=True):
            edges.append((hub, v, 9, 0))
            flow.append(f)
    for _ in range(draw(st.integers(0, 2))):  # an edge with flow out of no hub (a spare-unit edge)
        edges.append((draw(st.sampled_from(member_nodes)), next(nodes), 1, 0))
        flow.append(draw(st.integers(0, 2)))
    hub_edges = len(edges)
    pool_edges = []
    for o, lst, stays, its_hubs, units in plans:
        src, first = next(nodes), len(edges)
        for _ in range(stays):
            edges.append((src, member_nodes[o], len(lst), 0))
        edges.extend((src, hub, len(lst), 1) for hub in its_hubs)
        flow.extend(units)
        pool_edges.append((lst, first, stays, its_hubs))
    num_nodes = next(nodes)
    if draw(RARELY):
        flow[draw(st.integers(0, len(flow) - 1))] += draw(st.sampled_from([1, -1, -2]))
    if draw(RARELY):
        num_nodes = hubs[-1]  # the last hub outside the graph's nodes
    if draw(RARELY):
        flow.pop()
    if draw(RARELY):
        hub_edges += draw(st.sampled_from([-1, 2]))
    return holder, pools, pool_edges, flow, edges, hub_edges, node_member, num_nodes


def _python(args: tuple[Any, ...]) -> Any:
    """The Python's holder, or its error's type."""
    try:
        return read_back_py(*copy.deepcopy(args[:7]))
    except (AssertionError, IndexError, ValueError, KeyError) as e:
        return type(e)


@settings(max_examples=500, deadline=None)
@given(args=inputs())
def test_the_core_gives_the_pythons_holder_or_none(core: Core, args: tuple[Any, ...]) -> None:
    want = _python(args)
    mine = copy.deepcopy(args)
    got = core.read_back(*mine)
    assert mine == args  # nothing changed in place
    if got is not None:
        assert got == want


@settings(max_examples=200, deadline=None)
@given(args=inputs())
def test_read_back_gives_the_pythons_answer_compiled_or_not(core: Core, args: tuple[Any, ...]) -> None:
    want = _python(args)
    try:
        got: Any = read_back(*copy.deepcopy(args))
    except (AssertionError, IndexError, ValueError, KeyError) as e:
        got = type(e)
    assert got == want


def test_the_core_takes_every_conserved_flow(core: Core) -> None:
    """A pool of three (one held elsewhere), one of one, two hubs, a member reached twice: taken, and
    the holder the Python's."""
    holder = [0, 1, 0, 2, 1]
    pools = [((0, 0, 1, False), [0, 1, 2]), ((-1, 1, 0, False), [3]), ((1, 2, 0, False), [4])]
    hub_a, hub_b, m0, m1, m2, spare = 0, 1, 2, 3, 4, 5
    edges = [(hub_a, m1, 9, 0), (hub_a, m2, 9, 0), (hub_b, m2, 9, 0), (hub_b, spare, 9, 0)]
    flow = [1, 0, 1, 1]
    pool_edges = [([0, 1, 2], 4, 1, [hub_a, hub_b]), ([3], 7, 0, [hub_a, hub_b]), ([4], 9, 1, [hub_b])]
    edges += [(6, m0, 3, 0), (6, hub_a, 3, 1), (6, hub_b, 3, 1), (7, hub_a, 1, 0), (7, hub_b, 1, 0)]
    edges += [(8, m1, 1, 0), (8, hub_b, 1, 1)]
    flow += [1, 1, 1, 0, 1, 1, 0]
    node_member = {m0: 0, m1: 1, m2: 2, spare: 2}
    args = (holder, pools, pool_edges, flow, edges, 4, node_member, 9)
    got = core.read_back(*args)
    assert got == read_back_py(*args[:7]) == [0, 1, 2, 2, 1]
