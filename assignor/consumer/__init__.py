"""Consumer-group assignment: pick the assignor, run it, describe the result.

Each assignor is a pure function ``(Cluster, ConsumerGroup) -> ConsumerPlan``.
This module owns what is common to all of them: the registry, the contract's
``stats`` and the output document, so that the CLI, the agent and the Spark
job report the same figures for the same plan.
"""

from __future__ import annotations

import importlib
import time
from collections import Counter
from collections.abc import Callable
from itertools import groupby
from operator import itemgetter

from ..model import Cluster, ConsumerGroup, ConsumerPlan, TopicPartition, is_cross_rack
from .owned import count_moved, previous_owners

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (issue 29)

if TYPE_CHECKING:
    from typing import Any

Assignor = Callable[[Cluster, ConsumerGroup], ConsumerPlan]


_MODULES = {
    "range": "range_assignor",
    "cooperative-sticky": "sticky",
    "rack-optimal": "rack_optimal",
}


def get_assignor(name: str) -> Assignor:
    """The assignor of that contract name; its module is imported on first use."""
    module = importlib.import_module(f"{__package__}.{_MODULES[name]}")
    assign: Assignor = module.assign
    return assign


def subscribed_partitions(cluster: Cluster, group: ConsumerGroup) -> set[TopicPartition]:
    topics = {t for m in group.members for t in m.topics}
    return {(t, p) for t in topics for p in range(len(cluster.topics[t]))}


class SubscribedTopics:
    """``(topic, partition) in view`` for every partition of a subscribed topic, without listing them.

    Statistics only ask membership of existing partitions, so the topic decides;
    a set of millions of pairs would cost more than the assignor.
    """

    __slots__ = ("topics",)

    def __init__(self, group: ConsumerGroup) -> None:
        self.topics = frozenset().union(*(m.topics for m in group.members))  # C-level over the names

    def __contains__(self, tp: object) -> bool:
        return isinstance(tp, tuple) and tp[0] in self.topics


def cross_rack_count(cluster: Cluster, group: ConsumerGroup, plan: ConsumerPlan) -> int:
    """Assigned partitions with no replica in their member's rack (the contract's definition).

    Counted per (member, topic run) as a histogram of replica-rack masks built
    by C-level iteration: the figure is recomputed from the plan, never taken
    from the assignor, at a cost close to reading the plan once.
    """
    racks = {m.member_id: m.rack for m in group.members}
    masks = cluster.masks
    total = 0
    subscriptions = {m.member_id: len(m.topics) for m in group.members}
    for mid, parts in plan.assignment.items():
        rack = racks[mid]
        if rack is None:
            continue
        bit = cluster.member_bit(rack)
        if len(parts) < 16 * subscriptions[mid]:  # short runs: one pass in Python beats a Counter per run
            # is_cross_rack inlined (the member has a rack here): one call less per partition.
            total += sum(1 for t, p in parts if (mask := masks[t][p]) and not mask & bit)
            continue
        for topic, run in groupby(parts, key=itemgetter(0)):
            histogram = Counter(map(masks[topic].__getitem__, map(itemgetter(1), run)))
            total += sum(n for mask, n in histogram.items() if is_cross_rack(rack, bit, mask))
    return total


def consumer_stats(
    cluster: Cluster, group: ConsumerGroup, plan: ConsumerPlan, elapsed_ms: float
) -> dict[str, Any]:
    subscribed = SubscribedTopics(group)
    counts = [len(v) for v in plan.assignment.values()]
    traffic: dict[str, Any] = {}
    if cluster.traffic is not None:  # the contract's traffic figures, only when the instance has traffic
        from ..traffic import consumer_traffic_stats  # (imported only then: issue 29, start-up)

        traffic = consumer_traffic_stats(cluster, group, plan.assignment)
    return {
        "partitions": sum(len(cluster.topics[t]) for t in subscribed.topics),
        "assigned": sum(counts),
        "cross_rack": cross_rack_count(cluster, group, plan),
        "max_minus_min": (max(counts) - min(counts)) if counts else 0,
        "moved": count_moved(plan, previous_owners(cluster, group), subscribed),
        **traffic,  # else the output is unchanged
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


def plan_document(cluster: Cluster, group: ConsumerGroup, pairs_as_lists: bool = True) -> dict[str, Any]:
    """The contract's output document for a consumer group.

    ``pairs_as_lists=False`` leaves each ``[topic, partition]`` as the plan's
    tuple: ``json.dumps`` writes the same bytes, without building millions of
    lists first (what ``rackplan assign`` does; callers that compare with
    decoded JSON keep the default).
    """
    plan, elapsed_ms = run_assignor(cluster, group)
    return consumer_document(cluster, group, plan, elapsed_ms, pairs_as_lists)


def consumer_document(
    cluster: Cluster, group: ConsumerGroup, plan: ConsumerPlan, elapsed_ms: float, pairs_as_lists: bool = True
) -> dict[str, Any]:
    """The output document of a plan :func:`run_assignor` made (see :func:`plan_document`)."""
    return {
        "consumer_group": plan_body(group, plan, pairs_as_lists),
        "stats": consumer_stats(cluster, group, plan, elapsed_ms),
    }


def plan_body(group: ConsumerGroup, plan: ConsumerPlan, pairs_as_lists: bool = True) -> dict[str, Any]:
    """The ``consumer_group`` object of the output: group id, assignment and revoked, sorted."""
    if pairs_as_lists:
        return {
            "group_id": group.group_id,
            "assignment": {m: [[t, p] for t, p in v] for m, v in sorted(plan.assignment.items())},
            "revoked": {m: [[t, p] for t, p in v] for m, v in plan.revoked.items()},
        }
    return {
        "group_id": group.group_id,
        "assignment": dict(sorted(plan.assignment.items())),
        "revoked": dict(plan.revoked),
    }
