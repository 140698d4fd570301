"""The compiled pool edges (``_flowcore.pool_edges``) append what the Python appends (issue 29).

:func:`rackplan.assignor.consumer.sticky.general_edges.pool_edges_py` is the oracle: on every input
the core takes, the same source nodes and edges appended in the same order and the same per-pool
answer; on every input it does not (a missing member node, a cost outside its 64-bit bound, a
length mismatch), None with nothing appended, so :func:`~.general_edges.pool_edges` builds it in
Python with the Python's own result or error.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.assignor.consumer.sticky.general_edges import pool_edges, pool_edges_py
from tests.assignor.general_core import RARELY

if TYPE_CHECKING:
    from rackplan.assignor.flow.compiled import Core

MASKS = (0, 1, 2, 3)


@st.composite
def inputs(draw: st.DrawFn) -> tuple[Any, ...]:
    """Pool-edge arguments shaped like a count-shift graph's, now and then off the shape the callers
    keep (an owner with a count but no node, a length mismatch, a huge price)."""
    n, n_topics, n_cls = draw(st.integers(1, 5)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    crossk = [{k: draw(st.integers(0, 3)) for k in MASKS} for _ in range(n_cls)]
    if draw(RARELY):
        crossk[0][0] = 2**31  # past the core's bound
    cls = [draw(st.integers(0, n_cls - 1)) for _ in range(n)]
    cnt = [draw(st.integers(0, 4)) for _ in range(n)]
    min_sub = [draw(st.integers(0, 4)) for _ in range(n_topics)]
    nodes = iter(range(draw(st.integers(0, 300)), 10**6))
    member_node = {i: next(nodes) for i in range(n) if cnt[i] > 0 and not draw(RARELY)}
    spare_of = {i: next(nodes) for i in range(n) if draw(st.booleans())}
    grows = {i: set(draw(st.lists(st.integers(0, n_topics - 1), max_size=3))) for i in spare_of}
    classes = [
        tuple(sorted(set(draw(st.lists(st.integers(0, n_cls - 1), max_size=3))))) for _ in range(n_topics)
    ]
    hub_nodes = [[next(nodes) for _ in gs] for gs in classes]
    if draw(RARELY):
        hub_nodes[0].append(next(nodes))  # one hub too many: the Python's strict zip raises
    keys = draw(
        st.lists(
            st.tuples(
                st.integers(-1, n - 1), st.integers(0, n_topics - 1), st.sampled_from(MASKS), st.booleans()
            ),
            unique=True,
            min_size=1,
            max_size=12,
        )
    )
    parts = iter(range(10**6))
    pools = [(key, [next(parts) for _ in range(draw(st.integers(1, 3)))]) for key in sorted(keys)]
    edges = [(0, 1, 1, 0)] * draw(st.integers(0, 3))  # what the graph had before its pools
    supply = [0] * draw(st.integers(0, 300))
    room = draw(st.integers(0, 3))
    big = 2**40 if draw(RARELY) else draw(st.integers(1, 200))
    return (
        pools,
        edges,
        supply,
        cnt,
        min_sub,
        member_node,
        spare_of,
        grows,
        room,
        hub_nodes,
        crossk,
        cls,
        classes,
        big,
    )


def _python(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The Python's result (or error) and the lists it appended to."""
    args = copy.deepcopy(args)
    try:
        return pool_edges_py(*args), args[1], args[2]
    except (KeyError, ValueError) as e:
        return type(e), args[1], args[2]


@settings(max_examples=400, deadline=None)
@given(args=inputs())
def test_the_core_appends_the_pythons_edges_or_nothing(core: Core, args: tuple[Any, ...]) -> None:
    want, want_edges, want_supply = _python(args)
    mine = copy.deepcopy(args)
    got = core.pool_edges(*mine)
    if got is None:  # not taken: nothing appended, and the Python decides
        assert (mine[1], mine[2]) == (args[1], args[2])
        assert _python(args) == (want, want_edges, want_supply)
        return
    assert got == want
    assert mine[1] == want_edges
    assert mine[2] == want_supply


@settings(max_examples=100, deadline=None)
@given(args=inputs())
def test_pool_edges_gives_the_pythons_answer_compiled_or_not(core: Core, args: tuple[Any, ...]) -> None:
    want = _python(args)
    mine = copy.deepcopy(args)
    try:
        got: Any = pool_edges(*mine)
    except (KeyError, ValueError) as e:
        got = type(e)
    assert (got, mine[1], mine[2]) == want
