"""Measured traffic expires: a rate is measured over the samples of the window ending *now*.

Found by an adversarial hunt (session 29): samples were dropped only when a new one was added, so once
ListOffsets failed (brokers silent) the last rate was measured forever, and the feed republished it once
a window stamped with the publish time, which the broker plugins (TrafficStore) take for fresh. The same
held for a group's committed offsets (GroupReads). docs/agent.md: "A partition's records/s is the slope
between its oldest and newest sample within ``traffic.window_s``".
"""

from __future__ import annotations

import json
from typing import Any

import structlog
from confluent_kafka import KafkaError

from rackplan.agent.testing import FakeAdmin
from rackplan.agent.traffic.publish import TrafficFeed
from tests.agent.cycle.test_run import cycle
from tests.agent.cycle.test_traffic_feed import FEED, TOPICS, feeding, produce

from .test_reads import OffsetsAdmin, reads
from .test_sampler import Clock, meter


def test_a_window_of_failed_samples_measures_nothing() -> None:
    admin = FakeAdmin({"orders": [[1]]})
    clock = Clock()
    m = meter(admin, clock, window_s=300)
    for t in (0, 100, 200, 300):  # 10 records/s
        clock.now, admin.ends = float(t), {("orders", 0): 10 * t}
        assert m.sample({"orders": 1})
    assert m.traffic({"orders": 1}) == {"orders": (1000.0,)}
    admin.down = True
    with structlog.testing.capture_logs():
        for t in range(330, 100_000, 30):  # silent brokers, ~28 hours
            clock.now = float(t)
            assert not m.sample({"orders": 1})
            measured = m.traffic({"orders": 1})
            # the samples of the window ending now: 200 and 300 measure until 500, then nothing
            assert measured == ({"orders": (1000.0,)} if t <= 500 else {}), t
    assert m.samples == ()


def test_the_window_ends_now_even_without_a_sample() -> None:
    """No partition asked this cycle (all leaderless): the window still moves on."""
    admin = FakeAdmin({"orders": [[1]]})
    clock = Clock()
    m = meter(admin, clock, window_s=100)
    for t in (0, 50):
        clock.now, admin.ends = float(t), {("orders", 0): t}
        assert m.sample({"orders": 1})
    clock.now = 140.0
    assert not m.sample({"orders": 1}, leaderless=[("orders", 0)])
    assert m.traffic({"orders": 1}) == {}


def test_a_groups_read_rate_expires_when_its_offsets_cannot_be_read_or_it_commits_nothing() -> None:
    failing: tuple[dict[tuple[str, int], int] | int, ...] = (KafkaError.COORDINATOR_NOT_AVAILABLE, {})
    for later in failing:  # a failed request; nothing committed
        admin = OffsetsAdmin()
        r = reads(admin)  # window_s 100
        with structlog.testing.capture_logs():
            for step in range(10):
                now = 30.0 * step
                admin.committed = {"g": {("t", 0): int(now * 4)} if step < 3 else later}
                r.sample({"g": {"t"}}, now)
                read = r.traffic("g", {"t": 1})
                # samples 0, 30, 60: two of them in the window from 30 s to 120 s, then one, then none
                assert read == ({"t": (400.0,)} if 30 <= now <= 120 else {}), (later, now)
        assert "g" not in r.samples


def test_a_records_measured_at_is_its_newest_sample_not_the_publish() -> None:
    admin = FakeAdmin({"orders": [[1], [2]], "audit": [[1]]})
    clock = Clock()
    m = meter(admin, clock, window_s=300)
    for t in (0, 100, 150):
        clock.now = float(t)
        admin.ends = {("orders", 0): t, ("orders", 1): 2 * t, ("audit", 0): t}
        if t == 150:
            del admin.ends["audit", 0]  # audit's newest sample is the one at 100
        assert m.sample({"orders": 2, "audit": 1})
    clock.now = 250.0  # published a while later (the cycle's planning, a retried publish)
    wall_ms = 1_795_000_000_000
    got = dict(TrafficFeed(300).records(m.traffic({"orders": 2, "audit": 1}), wall_ms))
    assert got.keys() == {"traffic/orders", "traffic/audit"}
    at = {k: json_of(v)["measured_at_ms"] for k, v in got.items()}
    assert at == {"traffic/orders": wall_ms - 100_000, "traffic/audit": wall_ms - 150_000}


def json_of(value: bytes | None) -> dict[str, Any]:
    assert value is not None
    doc: dict[str, Any] = json.loads(value)
    return doc


def test_the_feed_stops_when_the_measurement_goes_stale() -> None:
    """The cycle: measured at ticks 30 and 60, the first publish not confirmed, then ListOffsets fails.
    The retry at 90 carries the measurement of 60 (not 90); a window later nothing is measured, and
    nothing is published (the plugins drop the last figures after their max age, by Kafka timestamp)."""
    admin = FakeAdmin(TOPICS)
    agent, pub = feeding(admin)  # window_s 100, a cycle every 30 s
    start = agent.tick[0]  # type: ignore[attr-defined]
    for step in range(2):
        produce(admin, step)
        pub.fail = step == 1
        cycle(agent)
    assert pub.on(FEED) == []
    pub.fail, admin.ends = False, {}  # every ListOffsets fails from now on
    cycle(agent)  # 90 s: the window still holds the samples of 30 and 60
    ((_key, value),) = pub.on(FEED)
    assert value["measured_at_ms"] == int((start + 60) * 1000) and value["bytes_per_s"] == [
        100.0,
        200.0,
        300.0,
        400.0,
    ]
    for _ in range(8):  # to 330 s: due again from 190 s, never measured again
        cycle(agent)
    assert len(pub.on(FEED)) == 1
    assert agent.term.traffic == {}
