"""Each compiled piece of the count-shift graph on real groups (issue 29): the recorded cliff seed's calls
all answered by the core, each as the Python answers; unequal seven-rack groups solving the same graphs
and plan with the core and without it (the install without a C compiler).

One table of the pieces (``general_edges``, ``general_nodes``, ``general_readback``, ``general_floor``,
``general_spare``: each a C entry point with its Python oracle as the fallback) instead of the same two
tests in each piece's file; the drawn-input tests of each piece stay there.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.assignor.consumer.sticky import (
    general_edges,
    general_floor,
    general_nodes,
    general_readback,
    general_spare,
)
from tests.assignor.general_core import cliff_calls, same_with_and_without_core

if TYPE_CHECKING:
    from rackplan.assignor.flow.compiled import Core

Right = Callable[[tuple[Any, ...], Any], bool]

#: (the piece's module, its core entry point, what a right answer is beside "not None")
PIECES: list[tuple[ModuleType, str, Right | None]] = [
    (general_edges, "pool_edges", None),
    (general_nodes, "members_and_hubs", None),
    (general_readback, "read_back", lambda args, got: bool(got == general_readback.read_back_py(*args[:7]))),
    (general_floor, "floor_cost", lambda args, got: bool(got == general_floor.floor_cost_py(*args))),
    (general_spare, "spare_units", None),
]
IDS = [name for _, name, _ in PIECES]


@pytest.mark.parametrize(("module", "name", "right"), PIECES, ids=IDS)
def test_the_cliff_groups_calls_are_answered_by_the_core(
    core: Core, module: ModuleType, name: str, right: Right | None
) -> None:
    """The recorded cliff seed: every call of the piece is answered by the core (none handed back to the
    Python), and where the answer is a value, it is the Python's."""
    answers = cliff_calls(module, name, core) if right is None else cliff_calls(module, name, core, right)
    assert answers and all(answers), (len(answers), answers.count(False))


@pytest.mark.parametrize(("module", "name", "right"), PIECES, ids=IDS)
@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000), n_members=st.integers(6, 24), n_parts=st.integers(30, 150))
def test_groups_solve_the_same_graphs_with_the_core_and_without(
    core: Core, module: ModuleType, name: str, right: Right | None, seed: int, n_members: int, n_parts: int
) -> None:
    """Unequal seven-rack groups, one member joining: every graph solved and the plan are the same with
    the piece built by the core and with no core."""
    same_with_and_without_core(module, seed, n_members, n_parts)
