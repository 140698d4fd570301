"""The labels the fleet compares a group under, and the spec each label runs.

A consumer group is compared across assignors (``range``, ``cooperative-sticky``,
``rack-optimal``, and the opt-in :data:`BYTES_OPTIMAL`), a Streams app across its
assignor's rack strategies (``high-availability+min_traffic``); the reference
of each kind is what the others are measured against.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rackplan.assignor.model import CONSUMER_ASSIGNORS

from .scenarios import CONSUMER

REFERENCE_CONSUMER = "rack-optimal"
REFERENCE_STRATEGY = "min_traffic"
#: the fleet's label for rack-optimal with ``objective: bytes`` (the fewest cross-rack bytes/s; opt-in
#: in ``fleet.consumer_assignors``): what weighing measured traffic would save
BYTES_OPTIMAL = "rack-optimal+bytes"
#: consumer labels the fleet compares: the contract's assignors and the bytes objective
CONSUMER_LABELS = (*CONSUMER_ASSIGNORS, BYTES_OPTIMAL)
#: consumer_group keys the contract accepts with rack-optimal only
RACK_OPTIMAL_ONLY = ("objective", "balance", "balance_floor")


def registered_label(kind: str, spec: Mapping[str, Any]) -> str:
    """The assignor a group is configured with (Streams: assignor+rack strategy)."""
    if kind == CONSUMER:
        return str(spec.get("assignor") or "cooperative-sticky")
    ra = spec.get("rack_aware")
    strategy = ra.get("strategy") if isinstance(ra, dict) else None
    return f"{spec.get('assignor') or 'high-availability'}+{strategy or 'none'}"


def assignor_labels(
    kind: str, spec: Mapping[str, Any], consumer_assignors: Sequence[str], strategies: Sequence[str]
) -> list[str]:
    """Every assignor compared on this group: consumer assignors, or the app's assignor+strategy."""
    if kind == CONSUMER:
        return list(consumer_assignors)
    base = str(spec.get("assignor") or "high-availability")
    return [f"{base}+{s}" for s in strategies]


def with_assignor(kind: str, spec: Mapping[str, Any], label: str) -> dict[str, Any]:
    """The spec using the assignor of ``label`` (Streams: the rack strategy after the ``+``).

    Consumer labels: an assignor name, or :data:`BYTES_OPTIMAL` (rack-optimal with ``objective: bytes``).
    The byte options are rack-optimal's (the contract refuses them with another assignor): a group
    registered with them keeps them under ``rack-optimal`` and drops them under ``range`` and
    ``cooperative-sticky``.
    """
    if kind == CONSUMER:
        if label == BYTES_OPTIMAL:
            return {**spec, "assignor": REFERENCE_CONSUMER, "objective": "bytes"}
        if label == REFERENCE_CONSUMER:
            return {**spec, "assignor": label}
        return {**{k: v for k, v in spec.items() if k not in RACK_OPTIMAL_ONLY}, "assignor": label}
    ra = dict(spec.get("rack_aware") or {})
    ra["strategy"] = label.rpartition("+")[2]
    return {**spec, "rack_aware": ra}


def reference_label(kind: str, spec: Mapping[str, Any]) -> str:
    """What the others are compared with: rack-optimal, or the app's assignor with min_traffic."""
    if kind == CONSUMER:
        return REFERENCE_CONSUMER
    return f"{spec.get('assignor') or 'high-availability'}+{REFERENCE_STRATEGY}"
