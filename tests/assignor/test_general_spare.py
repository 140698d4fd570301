"""The compiled spare units of a count-shift graph (``_flowcore.spare_units``) are the Python's (issue 29).

:func:`rackplan.assignor.consumer.sticky.general_spare.spare_units_py` is the oracle: on every input the
core takes, the same nodes and edges appended in the same order, the same dict entries in the same order
and the same room; on every input it does not (a dropper without a node, a member or topic outside the
lists, spare units already made), None with the lists and dicts as they came, so
:func:`~.general_spare.spare_units` makes them in Python with the Python's own result or error.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.assignor.consumer.sticky.general_spare import spare_units, spare_units_py
from tests.assignor.general_core import RARELY

if TYPE_CHECKING:
    from rackplan.assignor.flow.compiled import Core


@st.composite
def inputs(draw: st.DrawFn) -> tuple[Any, ...]:
    """Arguments shaped like a count-shift graph's after its member and hub nodes (a node per member with a
    count, some hubs, the member edges), losers, banned members, droppers and a gainer; now and then off
    that shape: a dropper without a node, a topic past the minima, a class list too short, spare units
    already made, a node number already a member's."""
    n, n_topics, n_cls = draw(st.integers(1, 12)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    cnt = [draw(st.integers(0, 5)) for _ in range(n)]
    min_sub = [draw(st.integers(0, 4)) for _ in range(n_topics)]
    mt = [sorted(draw(st.sets(st.integers(0, n_topics - 1), max_size=n_topics))) for _ in range(n)]
    if draw(RARELY):
        mt[0].append(n_topics)  # a topic with no minimum: the Python's IndexError (when it asks)
    cls = [draw(st.integers(0, n_cls - 1)) for _ in range(n)]
    if draw(RARELY):
        cls.pop()  # the last member without a class: the Python's IndexError (when it asks)
    supply: list[int] = []
    edges: list[tuple[int, int, int, int]] = []
    hubs: dict[tuple[int, int], int] = {}
    for t, g in sorted(
        draw(st.sets(st.tuples(st.integers(0, n_topics - 1), st.integers(0, n_cls - 1)), max_size=4))
    ):
        hubs[(t, g)] = len(supply)
        supply.append(0)
    member_node: dict[int, int] = {}
    for i in range(n):
        if cnt[i] > 0:
            member_node[i] = len(supply)
            supply.append(-cnt[i])
    for (_t, g), hub in hubs.items():
        for i, v in member_node.items():
            if i < len(cls) and cls[i] == g:
                edges.append((hub, v, cnt[i], 0))
    with_count = [i for i in range(n) if cnt[i] > 0]
    drops = set(draw(st.lists(st.sampled_from(with_count), max_size=2))) if with_count else set()
    if draw(RARELY) and drops:
        del member_node[min(drops)]  # a dropper without a node: the Python makes one
    losers = frozenset(draw(st.sets(st.integers(0, n - 1), max_size=2)) - drops)
    banned = frozenset(draw(st.sets(st.integers(0, n - 1), max_size=2)))
    gainer = draw(st.integers(-1, n - 1))
    node_member = {v: i for i, v in member_node.items()}
    spare_of: dict[int, int] = {0: 99} if draw(RARELY) else {}
    if draw(RARELY):
        node_member[len(supply) + 1] = 0  # the next node number taken: the Python overwrites it
    return (
        drops, losers, banned, gainer, cnt, min_sub, mt, cls, supply, edges, hubs, member_node, spare_of, {},
        node_member,
    )  # fmt: skip


def _made(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """What the call made: the lists, and every dict's entries in order."""
    return (
        args[8],
        args[9],
        list(args[10].items()),
        list(args[11].items()),
        list(args[12].items()),
        list(args[13].items()),
        list(args[14].items()),
    )


def _python(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The Python's room (or its error's type) and what it made."""
    args = copy.deepcopy(args)
    try:
        got: Any = spare_units_py(*args)
    except (IndexError, KeyError) as e:
        got = type(e)
    return got, _made(args)


@settings(max_examples=500, deadline=None)
@given(args=inputs())
def test_the_core_makes_the_pythons_spare_units_or_nothing(core: Core, args: tuple[Any, ...]) -> None:
    want = _python(args)
    mine = copy.deepcopy(args)
    got = core.spare_units(*mine)
    if got is None:  # not taken: nothing made, and the Python decides
        assert mine == args
        assert _made(mine) == _made(args)
        return
    assert (got, _made(mine)) == want


@settings(max_examples=100, deadline=None)
@given(args=inputs())
def test_spare_units_gives_the_pythons_answer_compiled_or_not(core: Core, args: tuple[Any, ...]) -> None:
    want = _python(args)
    mine = copy.deepcopy(args)
    try:
        got: Any = spare_units(*mine)
    except (IndexError, KeyError) as e:
        got = type(e)
    assert (got, _made(mine)) == want


def test_the_core_makes_the_spare_node_droppers_then_growers_in_the_pythons_order(core: Core) -> None:
    """Three members over two topics: member 0 a loser, member 1 a dropper, members 1 and 2 growing in
    both topics (one above the minimum, with a dropper), a hub made for topic 1 and class 0 by the first of
    them; no gainer: the spare node demands two units (the loser's, the dropper's)."""

    def made() -> tuple[Any, ...]:
        supply = [0, -3, -2, -1]  # hub (0, 0), then members 0, 1, 2
        edges = [(0, 1, 3, 0), (0, 2, 2, 0), (0, 3, 1, 0)]
        return (
            {1}, frozenset({0}), frozenset(), -1, [3, 2, 1], [1, 1], [[0], [0, 1], [0, 1]], [0, 0, 0],
            supply, edges, {(0, 0): 0}, {0: 1, 1: 2, 2: 3}, {}, {}, {1: 0, 2: 1, 3: 2},
        )  # fmt: skip

    args = made()
    assert core.spare_units(*args) == 1
    assert _made(args) == _python(made())[1]
    assert args[8] == [0, -3, -2, -1, -2, 0, 0, 0]  # spare node 4, member 1's 5, hub (1, 0) 6, member 2's 7
    assert args[9][3:] == [
        (2, 4, 1, 0),
        (5, 4, 1, 0),
        (0, 5, 1, 0),
        (6, 5, 1, 0),
        (7, 4, 1, 0),
        (0, 7, 1, 0),
        (6, 7, 1, 0),
    ]
    assert (
        args[12] == {1: 5, 2: 7} and args[13] == {1: {0, 1}, 2: {0, 1}} and args[10] == {(0, 0): 0, (1, 0): 6}
    )
