"""The compiled member and hub nodes (``_flowcore.members_and_hubs``) are the Python's (issue 29).

:func:`rackplan.assignor.consumer.sticky.general_nodes.members_and_hubs_py` is the oracle: on every
input the core takes, the same nodes and edges appended in the same order, the same dict entries in
the same order and the same answer; on every input it does not (a member outside the counts, a class
out of range, lists not empty), None with the lists and dicts as they came, so
:func:`~.general_nodes.members_and_hubs` builds them in Python with the Python's own result or error.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.assignor.consumer.sticky.general_nodes import members_and_hubs, members_and_hubs_py
from tests.assignor.general_core import RARELY

if TYPE_CHECKING:
    from rackplan.assignor.flow.compiled import Core


@st.composite
def inputs(draw: st.DrawFn) -> tuple[Any, ...]:
    """Arguments shaped like a count-shift graph's (subscribers ascending, counts, a topic's minimum,
    droppers), now and then off that shape: a subscriber outside the counts, a class past the core's
    bound, a graph not empty, fewer members than counts."""
    n, n_topics, n_cls = draw(st.integers(1, 6)), draw(st.integers(0, 5)), draw(st.integers(1, 4))
    tm = [sorted(draw(st.sets(st.integers(0, n - 1), max_size=n))) for _ in range(n_topics)]
    if n_topics and draw(RARELY):
        tm[0].append(n)  # a subscriber with no count: the Python's IndexError
    cnt = [draw(st.integers(-1, 5)) for _ in range(n)]
    min_sub = [draw(st.integers(0, 4)) for _ in range(n_topics)]
    drops = set(draw(st.lists(st.integers(0, n - 1), max_size=3)))
    cls = [draw(st.integers(0, n_cls - 1)) for _ in range(n)]
    if draw(RARELY):
        cls[0] = 2**20  # past the core's bound
    supply: list[int] = [5] if draw(RARELY) else []
    n_members = n - 1 if draw(RARELY) else n
    return n_topics, n_members, tm, cnt, min_sub, drops, cls, supply, [], {}, {}


def _python(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The Python's answer (or its error's type) and what it made, dict entries in order."""
    args = copy.deepcopy(args)
    try:
        got: Any = list(members_and_hubs_py(*args).items())
    except (IndexError, KeyError) as e:
        got = type(e)
    return got, args[7], args[8], list(args[9].items()), list(args[10].items())


@settings(max_examples=500, deadline=None)
@given(args=inputs())
def test_the_core_makes_the_pythons_nodes_or_nothing(core: Core, args: tuple[Any, ...]) -> None:
    want = _python(args)
    mine = copy.deepcopy(args)
    got = core.members_and_hubs(*mine)
    if got is None:  # not taken: nothing made, and the Python decides
        assert mine == args
        return
    assert (list(got.items()), mine[7], mine[8], list(mine[9].items()), list(mine[10].items())) == want


@settings(max_examples=100, deadline=None)
@given(args=inputs())
def test_members_and_hubs_gives_the_pythons_answer_compiled_or_not(core: Core, args: tuple[Any, ...]) -> None:
    want = _python(args)
    mine = copy.deepcopy(args)
    try:
        got: Any = list(members_and_hubs(*mine).items())
    except (IndexError, KeyError) as e:
        got = type(e)
    assert (got, mine[7], mine[8], list(mine[9].items()), list(mine[10].items())) == want


def test_the_core_makes_hubs_then_members_in_the_pythons_order(core: Core) -> None:
    """Two topics, three members of two classes, one a dropper, one with a count no hub reaches."""
    args: tuple[Any, ...] = (2, 3, [[0, 1], [1, 2]], [2, 1, 4], [1, 0], {1}, [0, 1, 0], [], [], {}, {})
    got = core.members_and_hubs(*args)
    assert got is not None
    assert (list(got.items()), args[7], args[8], list(args[9].items()), list(args[10].items())) == _python(
        (2, 3, [[0, 1], [1, 2]], [2, 1, 4], [1, 0], {1}, [0, 1, 0], [], [], {}, {})
    )
    assert args[7] == [0, -2, 0, 0, 0, -4] and args[9] == {(0, 0): 0, (0, 1): 2, (1, 1): 4}
