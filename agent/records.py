"""Moved to :mod:`rackplan.agent.protocol.records`; these names stay importable from here."""

from __future__ import annotations

from .protocol.records import (
    MAX_DEPTH,
    MAX_HEARTBEAT_BYTES,
    MAX_PLAN_BYTES,
    MAX_REGISTRATION_BYTES,
    MAX_SAFE_INT,
    REASONS,
    RecordError,
    load_record,
    nesting_depth_exceeds,
    safe_int,
)

__all__ = [
    "MAX_DEPTH",
    "MAX_HEARTBEAT_BYTES",
    "MAX_PLAN_BYTES",
    "MAX_REGISTRATION_BYTES",
    "MAX_SAFE_INT",
    "REASONS",
    "RecordError",
    "load_record",
    "nesting_depth_exceeds",
    "safe_int",
]
