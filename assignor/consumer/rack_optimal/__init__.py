"""rack-optimal: the fewest cross-rack partitions a balanced assignment can have, then the fewest moves.

:mod:`.plan` chooses the objective and says what is exact; :mod:`.class_flow`
is the fair optimum (stages A and B), :mod:`.balanced` with :mod:`.milp` and
:mod:`.neighbourhood` the exact step for unequal subscriptions,
:mod:`.bytes_objective` and :mod:`.load_balance` the traffic objectives.
Names are imported on first use (:mod:`rackplan.assignor.surface`).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (issue 29)

if TYPE_CHECKING:
    from .class_flow import fair_assign as fair_assign
    from .plan import assign as assign
else:
    from ...surface import attach

    __getattr__, __dir__, __all__ = attach(__name__, __file__)
