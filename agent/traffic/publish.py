"""The broker plugins' traffic feed: each measured topic's bytes/s per partition, one compacted record a topic.

``RackplanServerAssignor`` (KIP-848, on the brokers) cannot measure traffic and
must not do I/O in ``assign``: it reads this feed on a thread of its own, as it
reads plans, and weighs what it holds in memory (docs/java.md, "Traffic").

The records go to a topic of their own (``traffic_topic``, default
``_rackplan.traffic``: compacted, broker-stamped), not the plan topic: every
reader of the plan topic (the followers, the agent's replay and watch,
``rackplan plans``) takes each key there for a plan and would count a traffic
record as a malformed one; plans are fenced by transactions and generations,
while a measurement needs neither (the newest one wins); and the brokers can be
granted Read on the feed alone.  Key ``traffic/<topic>`` (UTF-8; compaction
keeps the newest), value (compact JSON)::

    {"schema": 1, "topic": "orders", "bytes_per_s": [1200.0, 35.5, 0.0],
     "window_s": 300.0, "measured_at_ms": 1795000000000}

``bytes_per_s`` is the contract's ``cluster.traffic`` row (one figure per
partition), ``measured_at_ms`` the wall-clock time of the newest sample it was
measured to (not of the publish); the record carries the publisher's MAC like
every record the agent writes.  Published only when measured, at most once per
``traffic.window_s`` (:meth:`TrafficFeed.due`); a topic the agent stops
measuring gets a tombstone. With nothing measured (a window of failed samples)
nothing is published: the plugins stop using the last records by their age.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from .rates import Measured

#: the key of a topic's record is this and the topic's name
KEY_PREFIX = "traffic/"
SCHEMA_VERSION = 1

#: per topic, bytes/s of each partition (the contract's ``cluster.traffic``)
Rates = Mapping[str, tuple[float, ...]]


def traffic_key(topic: str) -> str:
    return KEY_PREFIX + topic


def encode_traffic(topic: str, rates: tuple[float, ...], window_s: float, measured_at_ms: int) -> bytes:
    """One topic's record value: compact JSON, figures rounded to a thousandth of a byte/s."""
    doc = {
        "schema": SCHEMA_VERSION,
        "topic": topic,
        "bytes_per_s": [round(float(r), 3) for r in rates],
        "window_s": float(window_s),
        "measured_at_ms": int(measured_at_ms),
    }
    return json.dumps(doc, separators=(",", ":")).encode()


@dataclass
class TrafficFeed:
    """When the feed was last confirmed (the agent's clock, seconds) and which topics it holds."""

    window_s: float
    published_at: float = -math.inf
    published: frozenset[str] = field(default_factory=frozenset)

    def due(self, traffic: Rates, now: float) -> bool:
        """Something is measured and a window has passed since the last confirmed publish."""
        return bool(traffic) and now - self.published_at >= self.window_s

    def records(self, traffic: Rates, now_ms: int) -> list[tuple[str, bytes | None]]:
        """A record per measured topic (sorted), and a tombstone per topic published before and not measured now.

        A record's ``measured_at_ms`` is when the newest sample of its figures was taken: ``now_ms`` (the
        wall clock, now) less that sample's age when ``traffic`` knows it (:class:`.rates.Measured`, what
        the meter gives), never the time of publishing figures measured earlier.
        """
        age = traffic.age_s if isinstance(traffic, Measured) else lambda _t: 0.0
        out: list[tuple[str, bytes | None]] = [
            (traffic_key(t), encode_traffic(t, traffic[t], self.window_s, now_ms - round(age(t) * 1000)))
            for t in sorted(traffic)
        ]
        out += [(traffic_key(t), None) for t in sorted(self.published - traffic.keys())]
        return out

    def confirmed(self, traffic: Rates, now: float) -> None:
        """The brokers confirmed :meth:`records`: the next publish is a window away."""
        self.published_at = now
        self.published = frozenset(traffic)
