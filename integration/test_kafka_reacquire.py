"""An agent that lost the lease and leads again publishes with a new plan producer (real Kafka).

While it stood by, the interim leader's first plan-topic publish (InitProducerId) bumped the epoch of the
shared ``transactional.id``: the producer of the agent's earlier term can never publish again.  Reused in
the next term, it was refused at that term's first plan ("plan producer fenced: another agent publishes
now", ``rackplan_publisher_fenced_total``) with no other agent running, and the plan waited for yet another
term (stand by, the lease again, the replays).
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from integration.e2e import AgentProcess
from integration.kafka.cluster import KafkaCluster

from .conftest import Target, range_group
from .test_kafka_fencing import _plans, plans_written_by, writer
from .test_kafka_operations import create


def _wait(what: str, done: Any, agent: AgentProcess, timeout: float = 90) -> float:
    t0 = time.monotonic()
    while not done():
        assert time.monotonic() - t0 < timeout, f"{what}: " + agent.log_path.read_text()[-3000:]
        assert agent.proc is not None and agent.proc.poll() is None, agent.log_path.read_text()[-3000:]
        time.sleep(0.5)
    return time.monotonic() - t0


def _count(agent: AgentProcess, event: str) -> int:
    return sum(1 for e in agent.events() if str(e.get("event", "")).startswith(event))


def test_a_leader_again_after_a_takeover_publishes_without_a_fence(
    real: Target, launched: KafkaCluster, tmp_path: Path, e2e_report: Any
) -> None:
    pay = create(real, "rpay", [[1], [4], [1], [2], [5], [2]])
    group = {**range_group(real.name("rpay"), [pay], racks="ab"), "assignor": "rack-optimal"}
    key = f"consumer/{group['group_id']}"
    settings = real.agent_settings(
        [group],
        {"poll_interval_s": 0.5, "change_persist_polls": 2, "log": {"format": "json", "level": "info"}},
        {"http": {"port": 0}, "ha": {"enabled": True, "session_timeout_s": 6.0}},
    ).model_dump(mode="json")
    settings["ha"].pop("agent_id", None)
    topic = settings["plan_topic"]
    a = AgentProcess(settings, tmp_path, "agent-a")
    b = AgentProcess(settings, tmp_path, "agent-b")
    try:
        a.start()
        _wait("A's first plan", lambda: any(writer(r) == "agent-a" for r in _plans(real, topic)), a)
        b.start()
        time.sleep(5)  # B joins the agents' group and stands by
        a.pause()
        launched.reassign({(pay, 0): [2], (pay, 3): [1]})
        plans_written_by(real, topic, key, b)  # B leads and published: its producer fenced A's
        a.resume()
        _wait("A stands by", lambda: _count(a, "leadership lost; standing by") == 1, a)
        assert _count(a, "plan producer fenced") == 0, "A stepped down through the lease"
        b.stop()  # a clean stop: A leads again at once
        _wait("A leads again", lambda: _count(a, "leading") == 2, a)
        since = max(r.offset for r in _plans(real, topic))
        launched.reassign({(pay, 0): [1], (pay, 3): [2]})
        again_s = _wait(
            "A's plan in its new term",
            lambda: any(writer(r) == "agent-a" and r.offset > since for r in _plans(real, topic)),
            a,
        )
        fenced = _count(a, "plan producer fenced")
        e2e_report(target="kafka", plan_after_reassign_s=round(again_s, 2), producer_fenced_events=fenced)
        assert fenced == 0, "the only agent running was refused as a zombie: its last term's producer"
    finally:
        with contextlib.suppress(Exception):
            a.resume()
        a.stop()
        b.stop()
