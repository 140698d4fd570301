"""The min-cost-flow solvers every rack assignor builds its graphs for, and their shared errors.

:mod:`.mincost` holds the exact solvers and :class:`FlowGraph` (their phases compiled
where the install built :mod:`.compiled`'s extension); :mod:`.prices`
the optimal dual prices rack-optimal reads its face from; :mod:`.highs` the
small integer programs HiGHS solves within a counted budget (imported by the
assignors that need it, never from here: it is the one door to ``highspy``).
Names are imported on first use (:mod:`rackplan.assignor.surface`).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (issue 29)

if TYPE_CHECKING:
    from .mincost import Edge as Edge
    from .mincost import FlowGraph as FlowGraph
    from .mincost import FlowResult as FlowResult
    from .mincost import InfeasibleFlow as InfeasibleFlow
    from .mincost import PostconditionError as PostconditionError
    from .mincost import min_cost_flow as min_cost_flow
    from .mincost import min_cost_flow_below as min_cost_flow_below
    from .mincost import min_cost_flow_phases as min_cost_flow_phases
else:
    from ..surface import attach

    __getattr__, __dir__, __all__ = attach(__name__, __file__)
