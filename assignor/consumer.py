"""Consumer-group assignment: pick the assignor, run it, describe the result.

Each assignor is a pure function ``(Cluster, ConsumerGroup) -> ConsumerPlan``.
This module owns what is common to all of them: the registry, the contract's
``stats`` and the output document, so that the CLI, the agent and the Spark
job report the same figures for the same plan.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from typing import Any, cast

from .model import Cluster, ConsumerGroup, ConsumerPlan, TopicPartition, is_cross_rack
from .owned import count_moved, previous_owners

Assignor = Callable[[Cluster, ConsumerGroup], ConsumerPlan]


_MODULES = {
    "range": "range_assignor",
    "cooperative-sticky": "sticky_assignor",
    "rack-optimal": "rack_optimal",
}


def get_assignor(name: str) -> Assignor:
    """The assignor of that contract name; its module is imported on first use."""
    module = importlib.import_module(f"{__package__}.{_MODULES[name]}")
    return cast(Assignor, module.assign)


def subscribed_partitions(cluster: Cluster, group: ConsumerGroup) -> set[TopicPartition]:
    topics = {t for m in group.members for t in m.topics}
    return {(t, p) for t in topics for p in range(len(cluster.topics[t]))}


def cross_rack_count(cluster: Cluster, group: ConsumerGroup, plan: ConsumerPlan) -> int:
    """Assigned partitions with no replica in their member's rack (the contract's definition)."""
    racks = {m.member_id: m.rack for m in group.members}
    total = 0
    for mid, parts in plan.assignment.items():
        rack = racks[mid]
        if rack is None:
            continue
        bit = cluster.member_bit(rack)
        masks = cluster.masks
        total += sum(1 for t, p in parts if is_cross_rack(rack, bit, masks[t][p]))
    return total


def consumer_stats(
    cluster: Cluster, group: ConsumerGroup, plan: ConsumerPlan, elapsed_ms: float
) -> dict[str, Any]:
    subscribed = subscribed_partitions(cluster, group)
    counts = [len(v) for v in plan.assignment.values()]
    return {
        "partitions": len(subscribed),
        "assigned": sum(counts),
        "cross_rack": cross_rack_count(cluster, group, plan),
        "max_minus_min": (max(counts) - min(counts)) if counts else 0,
        "moved": count_moved(plan, previous_owners(cluster, group), subscribed),
        **plan.stats,  # the assignor's additive fields
        "elapsed_ms": round(elapsed_ms, 3),
    }


def run_assignor(cluster: Cluster, group: ConsumerGroup) -> tuple[ConsumerPlan, float]:
    """Run the group's assignor; the plan comes back with every member listed and lists sorted."""
    assign = get_assignor(group.assignor)  # the import is not the assignor's time
    start = time.perf_counter()
    plan = assign(cluster, group)
    elapsed_ms = (time.perf_counter() - start) * 1000.0
    assignment = {m.member_id: sorted(plan.assignment.get(m.member_id, ())) for m in group.members}
    revoked = {m: sorted(v) for m, v in sorted(plan.revoked.items()) if v}
    return ConsumerPlan(assignment=assignment, revoked=revoked, stats=plan.stats), elapsed_ms


def plan_document(cluster: Cluster, group: ConsumerGroup) -> dict[str, Any]:
    """The contract's output document for a consumer group."""
    plan, elapsed_ms = run_assignor(cluster, group)
    return {
        "consumer_group": {
            "group_id": group.group_id,
            "assignment": {m: [[t, p] for t, p in v] for m, v in sorted(plan.assignment.items())},
            "revoked": {m: [[t, p] for t, p in v] for m, v in plan.revoked.items()},
        },
        "stats": consumer_stats(cluster, group, plan, elapsed_ms),
    }
