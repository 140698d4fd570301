"""The leader's heartbeat on the lease topic: key ``leader``, a JSON value (docs/lease-schema.json).

The publishing agent writes one every cycle (:mod:`rackplan.agent.ha.lease` holds
the lease itself); plan followers read it to tell a live agent from a gone
one.  Schema: :class:`rackplan.agent.protocol.models.HeartbeatValue`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..core.errors import AgentError
from .records import MAX_HEARTBEAT_BYTES, RecordError, load_record, safe_int

LEASE_SCHEMA = 1
HEARTBEAT_KEY = b"leader"
#: a heartbeat's interval_s above this is refused: a forged day-long interval would keep it "live" for days
MAX_INTERVAL_S = 3600.0


class HeartbeatError(AgentError, ValueError):
    """A record on the lease topic that is not a heartbeat; ``reason`` is a metric label."""

    def __init__(self, detail: str, reason: str = "invalid") -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Heartbeat:
    agent_id: str
    epoch: int
    timestamp_ms: int
    interval_s: float
    #: the agents' consumer group (``ha.group_id``) when the writer runs for the lease, else None
    lease_group: str | None = None
    #: the writer stopped cleanly: its last heartbeat, nobody needs to wait for it
    released: bool = False
    #: the record's broker timestamp, when read from the topic (not part of the value)
    seen_ms: int | None = field(default=None, compare=False)

    def encode(self) -> bytes:
        return json.dumps(
            {
                "schema": LEASE_SCHEMA,
                "agent_id": self.agent_id,
                "epoch": self.epoch,
                "timestamp_ms": self.timestamp_ms,
                "interval_s": min(self.interval_s, MAX_INTERVAL_S),  # readers refuse more
                "lease_group": self.lease_group,
                "released": self.released,
            },
            separators=(",", ":"),
        ).encode()

    def seen_at(self, now_ms: int, max_skew_ms: int) -> int:
        """When it was written, as far as a reader can trust: the broker's record timestamp (else the
        writer's), but never later than the reader's clock plus ``max_skew_ms``: a heartbeat dated
        further ahead counts as written now (``now_ms``: when it was read)."""
        ts = self.seen_ms if self.seen_ms is not None else self.timestamp_ms
        return now_ms if ts > now_ms + max_skew_ms else ts

    def age_ms(self, now_ms: int) -> int:
        """How old it is by the broker's timestamp when known (a writer's clock can lie), else its own."""
        return now_ms - (self.seen_ms if self.seen_ms is not None else self.timestamp_ms)


def decode_heartbeat(key: bytes | None, value: bytes | None) -> Heartbeat:
    if key != HEARTBEAT_KEY:
        raise HeartbeatError(f"key {(key or b'')[:200]!r} is not {HEARTBEAT_KEY!r}", "bad_key")
    if value is None:
        raise HeartbeatError("tombstone", "invalid")
    try:
        v = load_record(value, MAX_HEARTBEAT_BYTES, "heartbeat")
    except RecordError as e:
        raise HeartbeatError(str(e), e.reason) from None
    if not isinstance(v, dict) or v.get("schema") != LEASE_SCHEMA:
        raise HeartbeatError("not a schema-1 heartbeat object", "schema")
    agent, interval = v.get("agent_id"), v.get("interval_s")
    if not isinstance(agent, str) or not agent:
        raise HeartbeatError("agent_id must be a non-empty string")
    try:
        epoch = safe_int(v.get("epoch"), "epoch")
        ts = safe_int(v.get("timestamp_ms"), "timestamp_ms")
    except RecordError as e:
        raise HeartbeatError(str(e), e.reason) from None
    if (
        not isinstance(interval, int | float)
        or isinstance(interval, bool)
        or not 0 < interval <= MAX_INTERVAL_S
    ):
        raise HeartbeatError(f"interval_s must be a positive number of seconds up to {MAX_INTERVAL_S}")
    group, released = v.get("lease_group"), v.get("released", False)
    if group is not None and not isinstance(group, str):
        raise HeartbeatError("lease_group must be a string or null")
    if not isinstance(released, bool):
        raise HeartbeatError("released must be a boolean")
    return Heartbeat(agent, epoch, ts, float(interval), group, released)
