"""``objective: bytes`` with count balance (interim: the partition objective's plan, not proven for bytes)."""

from __future__ import annotations

import dataclasses

from ...model import Cluster, ConsumerGroup, ConsumerPlan


def assign_bytes(cluster: Cluster, group: ConsumerGroup) -> ConsumerPlan:
    """The count-balanced partition-optimal plan; ``optimal`` is false (bytes are not proven)."""
    from . import assign

    plan = assign(cluster, dataclasses.replace(group, objective="partitions"))
    return dataclasses.replace(plan, stats={"optimal": False})
