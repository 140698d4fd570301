"""The cycle publishes measured traffic for the broker plugins: once a window, only when measured, retried when
not confirmed, never in observe mode, and never on the plan topic (whose readers take every key for a plan)."""

from __future__ import annotations

from typing import Any

from rackplan.agent.runtime.loop import Agent
from rackplan.agent.testing import FakeAdmin, FakePublisher

from .test_run import cycle, group, make_agent

TOPICS = {"t": [[1], [1], [2], [2]]}
FEED = "_rackplan.traffic"


def feeding(admin: FakeAdmin, **extra: Any) -> tuple[Agent, FakePublisher]:
    agent, pub, _ = make_agent(admin, [group("g")], traffic={"window_s": 100, "record_bytes": 10.0}, **extra)
    meter = agent.io.traffic
    assert meter is not None
    meter.clock = lambda: agent.tick[0]  # type: ignore[attr-defined]
    return agent, pub


def produce(admin: FakeAdmin, step: int) -> None:
    """10, 20, 30 and 40 records/s on t-0..t-3, sampled every 30 s."""
    admin.ends = {("t", p): step * 30 * 10 * (p + 1) for p in range(4)}


def test_measured_traffic_is_published_once_a_window_with_the_rates() -> None:
    admin = FakeAdmin(TOPICS)
    agent, pub = feeding(admin)
    produce(admin, 0)
    cycle(agent)
    assert pub.on(FEED) == []  # one sample: nothing measured yet
    produce(admin, 1)
    cycle(agent)
    ((key, value),) = pub.on(FEED)
    assert key == "traffic/t"
    assert value["bytes_per_s"] == [100.0, 200.0, 300.0, 400.0]
    assert value["schema"] == 1 and value["topic"] == "t" and value["window_s"] == 100.0
    assert value["measured_at_ms"] == int(agent.tick[0] * 1000)  # type: ignore[attr-defined]
    for step in (2, 3):  # 30 s and 60 s later: inside the window
        produce(admin, step)
        cycle(agent)
    assert len(pub.on(FEED)) == 1
    produce(admin, 4)
    cycle(agent)  # 90 s
    produce(admin, 5)
    cycle(agent)  # 120 s after the first publish
    assert len(pub.on(FEED)) == 2
    assert all(not k.startswith("traffic/") for k, _ in pub.on("_rackplan.plans"))


def test_a_publish_not_confirmed_is_counted_and_tried_again_the_next_cycle() -> None:
    admin = FakeAdmin(TOPICS)
    agent, pub = feeding(admin)
    for step in range(2):
        produce(admin, step)
        pub.fail = step == 1
        cycle(agent)
    assert pub.on(FEED) == []
    assert agent.metrics.get("rackplan_publish_failures_total", {"record": "traffic"}) == 1
    pub.fail = False
    produce(admin, 2)
    cycle(agent)
    assert len(pub.on(FEED)) == 1


def test_nothing_is_published_in_observe_mode_or_without_a_traffic_topic() -> None:
    for extra in ({"mode": "observe"}, {"traffic_topic": None}):
        admin = FakeAdmin(TOPICS)
        agent, pub = feeding(admin, **extra)
        assert agent.io.traffic_feed is None
        for step in range(3):
            produce(admin, step)
            cycle(agent)
        assert pub.on(FEED) == []
