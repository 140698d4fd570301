"""Kafka Streams task assignment (KIP-925): run the app's assignor, describe the result.

``plan_document`` is the contract's ``streams_app`` output; the assignors
live in :mod:`rackplan.assignor.streams.ha` and :mod:`rackplan.assignor.streams.sticky`, the
rack optimisation in :mod:`rackplan.assignor.streams.rack`.
"""

from __future__ import annotations

import math
import time

from ..fields import InputError
from ..model import Cluster, StreamsApp
from .rack import disabled_reason
from .tasks import State, TaskModel, build_model

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (issue 29)

if TYPE_CHECKING:
    from typing import Any


def run(cluster: Cluster, app: StreamsApp) -> tuple[TaskModel, State, bool]:
    """Assign the app; returns the model, the final state and ``probing_rebalance_needed``."""
    if not app.clients:
        raise InputError("streams_app.clients", "at least one client is needed to assign tasks")
    model = build_model(cluster, app)
    reason = disabled_reason(model, app)
    if reason is not None and app.rack_aware.strategy != "none":
        import logging  # only here: a Streams app whose rack optimisation runs never imports it (issue 29)

        logging.getLogger(__name__).warning("rack-aware assignment disabled: %s", reason)
    if app.assignor == "sticky":
        from .sticky import assign
    else:
        from .ha import assign
    state, probing = assign(model, app, reason is None)
    return model, state, probing


def effective_traffic_cost(app: StreamsApp) -> int:
    """The stateful traffic weight the app's assignor uses (Kafka's default when unset)."""
    return app.rack_aware.costs(app.assignor)[0]


def streams_stats(model: TaskModel, state: State, app: StreamsApp, elapsed_ms: float) -> dict[str, Any]:
    """The contract's figures; ``traffic_cost`` is the traffic weight times all cross-rack pairs."""
    active_cross = sum(
        model.active_cross[t][model.group_of[c]] for c in range(model.num_clients) for t in state.active[c]
    )
    standby_cross = sum(
        model.standby_cross[t][model.group_of[c]] for c in range(model.num_clients) for t in state.standby[c]
    )
    loads = [state.active_load(c) for c in range(model.num_clients)]
    traffic: dict[str, float] = {}
    if model.has_traffic:  # the instance has traffic: the contract's additive figures
        from ..traffic import streams_traffic_stats  # only here (issue 29: start-up)

        active_b = [
            model.active_cross_bytes[t][model.group_of[c]]
            for c in range(model.num_clients)
            for t in state.active[c]
        ]
        standby_b = [
            model.standby_cross_bytes[t][model.group_of[c]]
            for c in range(model.num_clients)
            for t in state.standby[c]
        ]
        traffic = streams_traffic_stats(math.fsum(active_b), math.fsum(standby_b))
    return {
        "tasks": model.num_tasks,
        "active_cross_rack": active_cross,
        "standby_cross_rack": standby_cross,
        "traffic_cost": effective_traffic_cost(app) * (active_cross + standby_cross),
        "max_minus_min_active_per_thread": round(max(loads) - min(loads), 6) if loads else 0,
        **traffic,
        "elapsed_ms": round(elapsed_ms, 3),
    }


def plan_document(cluster: Cluster, app: StreamsApp) -> dict[str, Any]:
    """The contract's output document for a Streams app."""
    start = time.perf_counter()
    model, state, probing = run(cluster, app)
    elapsed_ms = (time.perf_counter() - start) * 1000.0
    names = model.tasks
    assignment = {
        client.process_id: {
            "active": [names[t] for t in sorted(state.active[c])],
            "standby": [names[t] for t in sorted(state.standby[c])],
            "warmup": [names[t] for t in sorted(state.warmup[c])],
        }
        for c, client in enumerate(model.clients)
    }
    return {
        "streams_app": {
            "application_id": app.application_id,
            "assignment": assignment,
            "probing_rebalance_needed": probing,
        },
        "stats": streams_stats(model, state, app, elapsed_ms),
    }
