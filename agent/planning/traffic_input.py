"""Which plans get the agent's measured traffic, and the assignor's model with it.

Only a group that asks for bytes gets them: a consumer group with
``objective: bytes`` or ``balance: bytes``, a Streams app with
``rack_aware.weigh_by_traffic``.  Every other plan is computed exactly as
without traffic, and so is a bytes group none of whose topics is measured yet
(no ``cluster.traffic`` at all, rather than one that knows nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rackplan.assignor import Cluster

from ..protocol.plans import CONSUMER

#: per topic, bytes/s of each partition: the contract's ``cluster.traffic``
Traffic = Mapping[str, tuple[float, ...]]


def wants_traffic(kind: str, spec: Mapping[str, Any]) -> bool:
    """Whether the group's plan weighs bytes (its settings or registration say so)."""
    if kind == CONSUMER:
        return spec.get("objective") == "bytes" or spec.get("balance") == "bytes"
    rack_aware = spec.get("rack_aware")
    return isinstance(rack_aware, Mapping) and rack_aware.get("weigh_by_traffic") is True


def with_traffic(cluster: Cluster, kind: str, spec: Mapping[str, Any], traffic: Traffic | None) -> Cluster:
    """``cluster`` with the measured bytes/s of its topics when the group wants them and any is measured."""
    if not traffic or not wants_traffic(kind, spec):
        return cluster
    mine = {t: traffic[t] for t in sorted(cluster.topics) if t in traffic}
    return cluster.with_traffic(mine) if mine else cluster
