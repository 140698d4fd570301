"""Followers without an agent: ordinary group subscription, and back to the plan when the agent returns.

The agent stops; its heartbeat ages past the followers' ``agent_timeout_s``;
they release their partitions, wait out the grace, subscribe to their group
with a logged warning, and keep consuming.  The agent comes back, sees members
in group subscription and publishes a plan that first assigns nothing; the
followers leave the group and confirm; the target plan follows.

Taking plan partitions back needs a plain commit, which Kafka accepts once the
group is empty again.  librdkafka's mock never removes a group once a member
joined it, so on the embedded cluster the followers' plain commits stay
refused: there they fall back again (nothing is lost), and the full return to
the plan runs on real Kafka (the default target).
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from rackplan.agent.core.logging import configure

from .conftest import FOLLOWER_AGENT_SETTINGS, RunningAgent, Target
from .e2e import CountedProducer, FollowerApp, Ledger, wait_until
from .test_followers import settled

RunAgent = Callable[..., RunningAgent]
AGENT_TIMEOUT_S = 3.0
GRACE_S = 0.5
MOCK_REASON = (
    "librdkafka's mock never removes a consumer group once a member joined it, so it refuses the plain "
    "commits with which followers take plan partitions back after a fallback"
)


def fallback_scenario(target: Target, run_agent: RunAgent, e2e_report: Any, complete: bool) -> None:
    orders = target.create_topic("orders", 6, 2)
    buf = io.StringIO()
    configure("json", "info", stream=buf)
    settings = target.agent_settings([], FOLLOWER_AGENT_SETTINGS)
    agent = run_agent(settings, target.cluster)
    agent.wait_for(lambda r: r.ok)
    group = target.name("fb")
    key = f"consumer/{group}"
    ledger = Ledger()
    fs = target.follower_settings(
        {"agent_timeout_s": AGENT_TIMEOUT_S, "fallback_grace_s": GRACE_S, "plan_timeout_s": 4.0}
    )
    apps = [FollowerApp(target.bootstrap, group, f"fb-{r}", f"az-{r}", [orders], ledger, fs) for r in "ab"]
    wait_until(lambda: settled(agent, key, apps), 30, "the followers to apply a plan")
    producer = CountedProducer(target.bootstrap, orders, 6, rate_per_s=150)
    producer.start()
    wait_until(lambda: len(ledger.consumed) > 100, 20, "the stream to flow")

    agent.stop()  # the agent is gone: its heartbeat ages
    t0 = time.monotonic()
    wait_until(
        lambda: all(a.follower.mode == "subscription" for a in apps), 20, "both followers to fall back"
    )
    fallback_s = time.monotonic() - t0
    mark = len(ledger.consumed)
    wait_until(lambda: len(ledger.consumed) > mark + 150, 20, "the stream to flow through group subscription")
    assert ledger.overlaps() == [], "the grace kept the fallback from sharing a partition"

    agent2 = run_agent(settings, target.cluster)
    back = agent2.wait_for(lambda r: any(p.key == key for p in r.published), timeout=20)
    (rejoin,) = [p for p in back.published if p.key == key]
    assert rejoin.reason == "followers rejoin the plan after group subscription"
    assert rejoin.state == "revoking" and all(parts == [] for parts in rejoin.body["assignment"].values())
    assert sorted(rejoin.handover["awaiting"]) == ["fb-a", "fb-b"]  # type: ignore[index]
    wait_until(
        lambda: all(a.follower.stats["rejoins"] >= 1 for a in apps), 20, "the followers to leave the group"
    )
    agent2.wait_for(lambda r: any(p.key == key for p in r.completed), timeout=20)
    if complete:
        wait_until(lambda: settled(agent2, key, apps), 30, "the followers to follow the plan again")
        mark = len(ledger.consumed)
        wait_until(lambda: len(ledger.consumed) > mark + 150, 20, "the stream to flow through the plan")
    elif target.cluster is not None:
        # The mock's group was never emptied: plain commits are refused, the followers fall back again.
        wait_until(
            lambda: all(a.follower.stats["take_refused"] >= 1 for a in apps), 20, "the refused plain commits"
        )
        wait_until(lambda: all(a.follower.mode == "subscription" for a in apps), 20, "the second fallback")

    producer.stop()
    wait_until(lambda: not ledger.missing(producer.delivered), 30, "every message to be consumed")
    for a in apps:
        a.stop()
    agent2.stop()
    log = [json.loads(line) for line in buf.getvalue().splitlines() if line.startswith("{")]
    warnings = [e for e in log if e["event"] == "falling back to group subscription"]
    e2e_report(
        target=target.kind,
        produced=len(producer.delivered),
        consumed=len(ledger.consumed),
        duplicates=ledger.duplicates(),
        fallback_after_s=round(fallback_s, 2),
        fallback_warnings=len(warnings),
        rejoined=complete,
    )
    assert ledger.missing(producer.delivered) == []
    assert ledger.overlaps() == []
    assert ledger.consumed_outside_ownership() == 0
    assert fallback_s <= AGENT_TIMEOUT_S + GRACE_S + 5.0
    assert any(w["reason"] == "the agent's heartbeat stopped" and w["level"] == "warning" for w in warnings)


def test_followers_fall_back_when_the_agent_is_gone(
    target: Target, run_agent: RunAgent, e2e_report: Any
) -> None:
    fallback_scenario(target, run_agent, e2e_report, complete=False)


def test_followers_follow_the_plan_again_when_the_agent_returns(
    target: Target, run_agent: RunAgent, e2e_report: Any
) -> None:
    if target.cluster is not None:
        pytest.skip(f"on the embedded target: {MOCK_REASON}")
    fallback_scenario(target, run_agent, e2e_report, complete=True)
