"""cooperative-sticky: Kafka's CooperativeStickyAssignor (KIP-54, KIP-429) with better rack locality (KIP-881).

:mod:`.plan` is the assignor and its guarantees; :mod:`.settling` and
:mod:`.general_settle` settle the target for equal and unequal subscriptions;
:mod:`.constrained` is the equal path's flow, :mod:`.general` and its
``general_*`` steps the unequal path.  Names are imported on first use
(:mod:`rackplan.assignor.surface`): an equal-subscription group never loads
the unequal path, nor its exact candidate's integer programs.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (issue 29)

if TYPE_CHECKING:
    from .general_settle import MAX_RUNS as MAX_RUNS
    from .general_settle import SETTLE_WORK as SETTLE_WORK
    from .general_settle import settle_general as settle_general
    from .plan import assign as assign
    from .settling import MAX_FOLLOW_UPS as MAX_FOLLOW_UPS
    from .settling import Settlement as Settlement
    from .settling import settle as settle
else:
    from ...surface import attach

    __getattr__, __dir__, __all__ = attach(__name__, __file__)
