"""Issue 24, item 8, on real Kafka: a forged plan carrying the agent's public headers moved a follower group
(one member 12/12 partitions) for 83 s, undetected.  With the registrations secret set, every record the agent
writes carries its MAC; the agent and its followers refuse one without it, whatever headers it copies.

The decisions (what is refused, counted, logged; the bounds on counters) are tested with fake clients in
tests/agent/test_forged_records.py; this is the same through librdkafka and brokers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from rackplan.agent.kafka.publisher import LEASE_GROUP_HEADER, WRITER_HEADER

from .conftest import FOLLOWER_AGENT_SETTINGS, RunningAgent, Target
from .e2e import FollowerApp, Ledger, wait_until
from .test_followers import settled

RunAgent = Callable[..., RunningAgent]


def test_a_forged_plan_with_copied_headers_is_refused_and_alerted_and_moves_nobody(
    real: Target, run_agent: RunAgent, e2e_report: Any, tmp_path: Path
) -> None:
    secret = tmp_path / "rackplan-secret"
    secret.write_text("a shared secret\n")
    orders = real.create_topic("orders", 6, 2)
    agent = run_agent(
        real.agent_settings([], FOLLOWER_AGENT_SETTINGS, {"registrations": {"secret_file": str(secret)}}),
        real.cluster,
    )
    agent.wait_for(lambda r: r.ok, timeout=60)
    group = real.name("forged")
    key = f"consumer/{group}"
    fs = real.follower_settings({"registration_secret_file": str(secret)})
    ledger = Ledger()
    apps = [FollowerApp(real.bootstrap, group, f"fg-{r}", f"az-{r}", [orders], ledger, fs) for r in "ab"]
    try:
        wait_until(lambda: settled(agent, key, apps), 60, "the followers to apply a signed plan")
        before = {a.name: (a.follower.generation, a.follower.assignment()) for a in apps}
        ours = agent.agent.term.book.latest(key)
        assert ours is not None
        # The forger copies the agent's headers and outbids its generation: every partition to fg-a.
        forged = {
            "schema": 1,
            "generation": ours.generation + 1000,
            "state": "proposed",
            "consumer_group": {
                "group_id": group,
                "assignment": {"fg-a": [[orders, p] for p in range(6)], "fg-b": []},
                "revoked": {},
            },
            "stats": {},
        }
        headers: list[tuple[str, str | bytes | None]] = [
            (WRITER_HEADER, agent.agent.agent_id.encode()),
            (LEASE_GROUP_HEADER, real.name("rackplan-agents").encode()),
        ]
        p = Producer({"bootstrap.servers": real.bootstrap})
        p.produce(
            real.control_topics["plan_topic"],
            key=key.encode(),
            value=json.dumps(forged).encode(),
            headers=headers,
        )
        p.produce(real.control_topics["plan_topic"], key=key.encode(), value=None, headers=headers)
        assert p.flush(10) == 0
        metrics = agent.agent.metrics
        wait_until(
            lambda: metrics.get("rackplan_foreign_writers_total", {"topic": "plans"}) >= 2,
            30,
            "the agent to report the foreign records",
        )
        wait_until(
            lambda: all(a.follower.stats["records_unauthenticated"] >= 2 for a in apps),
            30,
            "both followers to refuse the forged plan and tombstone",
        )
        time.sleep(3.0)  # several follower polls and agent cycles after the forgery
        after = {a.name: (a.follower.generation, a.follower.assignment()) for a in apps}
        refused = {a.name: a.follower.stats["records_unauthenticated"] for a in apps}
    finally:
        for a in apps:
            a.stop()
    skipped = metrics.get("rackplan_records_skipped_total", {"topic": "plans", "reason": "unsigned"})
    print(
        f"forged plan and tombstone: agent skipped {skipped}, followers refused {refused}; assignments kept"
    )
    e2e_report(
        target=real.kind, forged_records=2, agent_refused=skipped, follower_refused=sum(refused.values())
    )
    assert after == before, "the forged plan moved nobody"
    assert skipped >= 2
    assert agent.agent.term.discrepancies() == {}
    latest = agent.agent.term.book.latest(key)
    assert latest is not None and latest.generation < ours.generation + 1000, (
        "the forged generation is not ours"
    )
    assert ledger.overlaps() == []
