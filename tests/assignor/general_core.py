"""What the tests of the count-shift graph's compiled pieces share (``general_edges``, ``general_nodes``,
``general_readback``: each a C entry point of the flow core with its Python oracle as the fallback).

Two checks each piece needs on real groups, not only on drawn inputs: the recorded cliff seed's calls
all answered by the core (none handed back to the Python), and unequal seven-rack groups solving the
same graphs and plan with the core and without it (the install without a C compiler).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import strategies as st

from rackplan.assignor.consumer.sticky import assign
from tests.assignor.test_general_pools import graphs_and_plan
from tests.assignor.test_sticky_work import one_joins, seven_racks

if TYPE_CHECKING:
    from rackplan.assignor.flow.compiled import Core

#: Now and then (Hypothesis draws the ends of a range often, so a middle value: about one in 21): the drawn
#: inputs' off-shape cases in the compiled pieces' tests.
RARELY = st.integers(0, 20).map(lambda x: x == 13)


def cliff_calls(
    module: ModuleType,
    name: str,
    core: Core,
    right: Callable[[tuple[Any, ...], Any], bool] = lambda args, got: True,
) -> list[bool]:
    """Per call of ``module.CORE.<name>`` while the cliff seed (41: 23 members, 148 partitions, one
    joining) is assigned: whether the core answered it, and answered it ``right``."""
    answers: list[bool] = []
    real = getattr(core, name)

    class Watched:
        def __getattr__(self, attr: str) -> Any:
            return getattr(core, attr)

    def watched(*args: Any) -> Any:
        got = real(*args)
        answers.append(got is not None and right(args, got))
        return got

    spy = Watched()
    setattr(spy, name, watched)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "CORE", spy)
        cluster, members = seven_racks(41, 23, 148)
        assign(cluster, one_joins(cluster, members))
    return answers


def same_with_and_without_core(module: ModuleType, seed: int, n_members: int, n_parts: int) -> None:
    """An unequal seven-rack group, one member joining: the graphs solved and the plan are the same with
    ``module``'s piece built by the core and with no core."""
    cluster, members = seven_racks(seed, n_members, n_parts)
    group = one_joins(cluster, members)
    compiled = graphs_and_plan(cluster, group, fresh=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "CORE", None)
        python = graphs_and_plan(cluster, group, fresh=False)
    assert compiled == python
