"""Java consumers through an agent kill (issue 14): the plan outlives its agent, and nothing is lost.

A classic cooperative group of three ``RackplanConsumer`` members follows its plan. Then, with a counted
stream of messages in flight, the agent is killed (SIGKILL to ``rackplan agent run``: supervisor and
agent die at once), and while no agent runs a member is killed too. The survivors fall back to Kafka's
CooperativeStickyAssignor (the plan no longer fits the live group) and take over every partition. The
agent is started again: it replays the plan and registrations topics, expires the dead member's
registration after its TTL and publishes a plan for the two survivors, which the group adopts.
Counted: 0 messages lost, 0 partitions owned by two members at any moment (every assignment callback is
logged with its time), the fallback's reason, and the times of each step.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from integration.e2e import AgentProcess
from integration.kafka.apps import plan_member
from integration.kafka.cluster import CLIENTS_JAR
from rackplan.agent.core.logging import get_logger
from rackplan.agent.kafka.exceptions import TopicReadError
from rackplan.agent.kafka.read_back import read_back
from rackplan.agent.protocol.plans import PlanRecord

from .conftest import Target
from .test_kafka_java_followers import (
    PLAN_BOUND_S,
    RACKS,
    Assignment,
    consumed,
    dump,
    feed,
    intervals,
    live_assignment,
    overlaps,
    plan_assignment,
    produce,
    wait_until,
)

pytestmark = pytest.mark.skipif(not CLIENTS_JAR.exists(), reason=f"{CLIENTS_JAR} missing: run `make clients`")

#: the Java members' registration TTL (integration/kafka/apps PlanMember: 60 s; they refresh every third of
#: it), which the agent applies too here (``registrations.ttl_s``; its default is 300 s)
MEMBER_TTL_S = 60.0
#: a dead member's registration expires at most a TTL after the restart; then a re-plan, and slack
EXPIRY_BOUND_S = MEMBER_TTL_S + 40.0


def newest_plan(real: Target, key: str) -> PlanRecord | None:
    try:
        records = read_back(
            {"bootstrap.servers": real.bootstrap}, real.control_topics["plan_topic"], 15, get_logger("t")
        )
    except TopicReadError:
        return None
    mine = [rec for k, rec in records if k == key]
    return mine[-1] if mine else None


def test_java_group_loses_nothing_when_the_agent_and_then_a_member_are_killed(
    real: Target, tmp_path: Path, e2e_report: Any
) -> None:
    topic = real.create_topic("jk-orders", 12, 2)
    group = real.name("jk-classic")
    key = f"consumer/{group}"
    config = real.agent_settings(
        [],
        {
            "poll_interval_s": 0.5,
            "registrations": {"ttl_s": MEMBER_TTL_S},
            "http": {"port": 0},
            "log": {"format": "json", "level": "info"},
        },
    ).model_dump(mode="json")
    config["ha"].pop("agent_id", None)
    agent = AgentProcess(config, tmp_path, "agent")
    agent.start()
    names = {real.name(f"m-{r}"): rack for r, rack in RACKS.items()}
    members = []
    try:
        wait_until(lambda: _topics_exist(real), 60, "the agent's topics")
        members = [
            plan_member(real.bootstrap, group, n, rack, [topic], "classic", real.control_topics, tmp_path)
            for n, rack in names.items()
        ]
        produce(real.bootstrap, topic, range(0, 1000))

        def plan_for(who: set[str]) -> PlanRecord | None:
            rec = newest_plan(real, key)
            return rec if rec is not None and set(plan_assignment(rec.document)) == who else None

        wait_until(lambda: plan_for(set(names)) is not None, 90, "a plan for the three members")
        first = plan_for(set(names))
        assert first is not None
        want: Assignment = plan_assignment(first.document)
        adopted_s = wait_until(
            lambda: live_assignment(real.bootstrap, group) == want, PLAN_BOUND_S, "adopted"
        )

        feeder = feed(real.bootstrap, topic, range(1000, 3000))  # in flight across both kills
        time.sleep(0.5)
        agent.kill()  # SIGKILL: no released heartbeat, no goodbye
        agent_killed = time.monotonic()
        time.sleep(1.0)
        victim, victim_name = members[2], list(names)[2]
        killed_at_ms = int(time.time() * 1000)
        victim.kill()
        feeder.join(60)
        survivors = set(list(names)[:2])
        fallback_s = wait_until(
            lambda: (
                set(live := live_assignment(real.bootstrap, group)) == survivors
                and sorted(tp for parts in live.values() for tp in parts) == [(topic, p) for p in range(12)]
            ),
            60,
            "the survivors hold every partition without an agent",
        )
        reasons = {
            x["reason"]
            for m in members[:2]
            for x in list(m.lines)
            if "plan_assignments" in x and x["at_ms"] > killed_at_ms and x["fallbacks"] > 0
        }
        wait_until(lambda: len(consumed(members)) == 3000, 60, "every message consumed without an agent")

        restarted = AgentProcess(config, tmp_path, "agent")  # the same agent id: its own heartbeat
        restarted.start()
        t_restart = time.monotonic()
        try:
            wait_until(lambda: plan_for(survivors) is not None, EXPIRY_BOUND_S, "a plan for the survivors")
            replanned_s = time.monotonic() - t_restart
            second = plan_for(survivors)
            assert second is not None and second.generation > first.generation
            want2 = plan_assignment(second.document)
            readopted_s = wait_until(
                lambda: live_assignment(real.bootstrap, group) == want2, PLAN_BOUND_S, "second plan adopted"
            )
            produce(real.bootstrap, topic, range(3000, 4000))
            wait_until(lambda: len(consumed(members)) == 4000, 60, "every message consumed")
        finally:
            assert restarted.stop() == 0, restarted.log_path.read_text()[-3000:]
        lost = 4000 - len(consumed(members) & {str(v) for v in range(4000)})
        twice = overlaps(intervals(members, {victim_name: killed_at_ms}))
        e2e_report(
            target="kafka",
            messages=4000,
            lost=lost,
            owned_twice=len(twice),
            first_plan_adopted_s=round(adopted_s, 1),
            survivors_hold_all_after_s=round(fallback_s, 1),
            agent_down_s=round(t_restart - agent_killed, 1),
            fallback_reasons=sorted(reasons),
            survivor_plan_after_restart_s=round(replanned_s, 1),
            survivor_plan_adopted_s=round(readopted_s, 1),
            generations=[first.generation, second.generation],
        )
        for m in members[:2]:
            assert m.process.poll() is None, f"a member died: {m.log.read_text(errors='replace')[-1500:]}"
        assert any("differ from the live members" in r for r in reasons), reasons
        assert lost == 0
        assert twice == [], twice
    finally:
        dump(members, tmp_path)
        for m in members:
            m.stop()
        agent.stop()


def _topics_exist(real: Target) -> bool:
    from confluent_kafka.admin import AdminClient

    from rackplan.agent.kafka.timeouts import admin_client_config

    admin = AdminClient(admin_client_config({"bootstrap.servers": real.bootstrap}, 10))
    return set(real.control_topics.values()) <= set(admin.list_topics(timeout=10).topics)
