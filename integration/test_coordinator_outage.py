"""The followers' group coordinator stops, and the agents fall silent, while a counted stream flows.

CI's chaos scenario once stopped a broker that happened to coordinate the
followers' group, and the agents' heartbeat stopped with it: every follower
fenced itself (its registration unconfirmed), fell back to group subscription
and came back to the plan, and the ledger showed a partition owned by two
followers.  This scenario makes that the case on purpose: it stops the
group's coordinator for 2 s and freezes both agents (SIGSTOP) for longer than
the followers' ``agent_timeout_s``.  At the end every message was consumed,
no partition was ever owned by two followers at once, and every follower is
back on a plan.  ``IT_COORDINATOR_REPEATS=N`` runs it N times (it is a race).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from .conftest import Target
from .e2e import wait_until
from .test_chaos import OUTAGE_S, followed_stream

#: the agents' silence: above the followers' agent_timeout_s (12 s) + fallback_grace_s (1 s)
SILENCE_S = 16.0
REPEATS = int(os.environ.get("IT_COORDINATOR_REPEATS", "1"))


def coordinator_of(bootstrap: str, group: str) -> int:
    """The broker coordinating ``group`` now."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    return int(desc.coordinator.id)


@pytest.mark.parametrize("attempt", range(REPEATS))
def test_the_groups_coordinator_stops_while_the_agents_are_silent(
    real: Target, tmp_path: Path, e2e_report: Any, attempt: int
) -> None:
    with followed_stream(real, tmp_path, "coord") as s:
        broker = coordinator_of(real.bootstrap, s.group)
        for agent in s.agents.values():
            agent.pause()
        real.stop_broker(broker)
        time.sleep(OUTAGE_S)
        real.start_broker(broker)
        time.sleep(SILENCE_S - OUTAGE_S)
        for agent in s.agents.values():
            agent.resume()
        mark = len(s.producer.delivered)
        wait_until(lambda: len(s.ledger.counts()) >= mark, 90, "the stream to catch up after the outage", 0.2)
        wait_until(s.settled, 90, "the followers back on a plan", 0.2)
        s.producer.stop()
        wait_until(
            lambda: not s.ledger.missing(s.producer.delivered), 60, "every message to be consumed", 0.2
        )

    ledger, stats = s.ledger, [a.follower.stats for a in s.apps.values()]
    e2e_report(
        stopped_broker=broker,
        produced=len(s.producer.delivered),
        duplicates=ledger.duplicates(),
        missing=len(ledger.missing(s.producer.delivered)),
        overlaps=len(ledger.overlaps()),
        self_fenced=sum(st["self_fenced"] for st in stats),
        fallbacks=sum(st["fallbacks"] for st in stats),
        rejoins=sum(st["rejoins"] for st in stats),
    )
    assert s.producer.failed == 0
    assert ledger.missing(s.producer.delivered) == [], "every message consumed at least once"
    assert ledger.overlaps() == [], ledger.describe_overlaps()
    assert ledger.consumed_outside_ownership() == 0
    assert sum(st["self_fenced"] for st in stats) >= 1, "the coordinator's outage fenced the followers"
    assert sum(st["fallbacks"] for st in stats) >= 1, "the agents' silence sent them to group subscription"
