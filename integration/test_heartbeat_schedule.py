"""The leader's heartbeat keeps its schedule while a cycle waits (issue 24, item 4), on the real cluster.

The agent leads through its real lease (a consumer group on the lease topic); its first plan publish is
held for :data:`STALL_S` inside the publisher, as one waiting on a slow transaction coordinator is.  The
heartbeats on the lease topic, dated by the broker (LogAppendTime), must keep coming through that wait:
before heartbeats had their own thread, none came until the cycle ended (gaps of 20-60 s were seen).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest

from rackplan.agent.kafka.exceptions import PublishError
from rackplan.agent.kafka.publisher import Publisher

from .conftest import RunningAgent, Target, range_group
from .e2e import heartbeats

STALL_S = 8.0
POLL_S = 0.5


def heartbeat_times_ms(bootstrap: str, topic: str, agent_id: str) -> list[int]:
    """Broker timestamps (LogAppendTime) of ``agent_id``'s heartbeats on the lease topic, oldest first."""
    return sorted(
        hb.seen_ms
        for hb in heartbeats(bootstrap, topic)
        if hb.agent_id == agent_id and not hb.released and hb.seen_ms is not None
    )


def test_heartbeats_keep_coming_while_a_plan_publish_waits(
    target: Target, run_agent: Callable[..., RunningAgent], monkeypatch: pytest.MonkeyPatch
) -> None:
    orders = target.create_topic("orders", 6, 3)
    session_s = 2.0 if target.cluster is not None else 6.0
    settings = target.agent_settings(
        [range_group(target.name("pay"), [orders])],
        {"poll_interval_s": POLL_S, "ha": {"enabled": True, "session_timeout_s": session_s}},
    )
    stalls: list[tuple[float, float]] = []
    publish_each = Publisher.publish_each

    def held(
        self: Publisher, topic: str, records: list[tuple[str, bytes | None]], timeout_s: float
    ) -> list[PublishError | None]:
        if topic == settings.plan_topic and not stalls:
            start = time.time()
            time.sleep(STALL_S)  # the cycle waits here, as on a transaction coordinator that does not answer
            stalls.append((start, time.time()))
        return publish_each(self, topic, records, timeout_s)

    monkeypatch.setattr(Publisher, "publish_each", held)
    running = run_agent(settings, target.cluster)
    running.wait_for(lambda r: bool(r.published), timeout=120)
    assert stalls, "the plan publish was not held"
    start_ms, end_ms = (int(t * 1000) for t in stalls[0])
    times = heartbeat_times_ms(target.bootstrap, settings.ha.lease_topic, running.agent.agent_id)
    inside = [t for t in times if start_ms <= t <= end_ms]
    around = [t for t in times if t <= end_ms + 1000]
    gaps = [(b - a) / 1000 for a, b in itertools.pairwise(around) if b >= start_ms]
    report: dict[str, Any] = {
        "stall_s": round((end_ms - start_ms) / 1000, 1),
        "heartbeats_during_stall": len(inside),
        "max_gap_s": max(gaps, default=None),
    }
    print(f"heartbeats while the publish waited: {report}")
    # One every 0.5 s would be 16; a loaded machine may lose a few, never most of them.
    assert len(inside) >= 5, report
    assert gaps and max(gaps) < STALL_S / 2, report
    running.stop()
