"""The sampler: ListOffsets each cycle, transient failures asked again, a failed sample skipped and logged."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import structlog
from confluent_kafka import KafkaError

from rackplan.agent.settings.traffic import TrafficSettings
from rackplan.agent.testing import FakeAdmin, kafka_error
from rackplan.agent.traffic.sampler import TrafficMeter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def meter(admin: FakeAdmin, clock: Clock, **settings: Any) -> TrafficMeter:
    s = TrafficSettings.model_validate({"record_bytes": 100, **settings})
    return TrafficMeter(admin, s, structlog.get_logger(), clock=clock, sleep=lambda _s: None)


def test_rates_from_samples_over_the_window() -> None:
    admin = FakeAdmin({"orders": [[1], [2], [3]]})
    clock = Clock()
    m = meter(admin, clock, window_s=100, topic_record_bytes={"orders": 50})
    for step in range(6):  # partition 0: 1 record/s, 1: 10/s, 2: idle
        clock.now = 20.0 * step
        admin.ends = {("orders", 0): 20 * step, ("orders", 1): 200 * step, ("orders", 2): 7}
        assert m.sample({"orders": 3})
    assert len(m.samples) == 6
    assert m.traffic({"orders": 3}) == {"orders": (50.0, 500.0, 0.0)}
    clock.now = 120.0
    admin.ends = {("orders", 0): 2000, ("orders", 1): 1200, ("orders", 2): 7}  # a burst on partition 0
    assert m.sample({"orders": 3})
    assert [s.taken_at for s in m.samples] == [20.0, 40.0, 60.0, 80.0, 100.0, 120.0]
    assert m.traffic({"orders": 3}) == {"orders": (50.0 * (2000 - 20) / 100, 500.0, 0.0)}


class Flaky(FakeAdmin):
    """ListOffsets fails LEADER_NOT_AVAILABLE for ``orders-1`` the first ``flaky`` times it is asked."""

    flaky = 1
    asked: list[int]

    def list_offsets(self, topic_partition_offsets: dict[Any, Any], **kw: Any) -> dict[Any, Future[Any]]:
        out = super().list_offsets(topic_partition_offsets, **kw)
        self.asked.append(len(topic_partition_offsets))
        for tp in out:
            if (tp.topic, tp.partition) == ("orders", 1) and self.flaky > 0:
                self.flaky -= 1
                out[tp] = kafka_error(KafkaError.LEADER_NOT_AVAILABLE)
        return out


def test_a_transient_partition_failure_is_asked_again_alone() -> None:
    admin = Flaky({"orders": [[1], [2]]}, ends={("orders", 0): 5, ("orders", 1): 9})
    admin.asked = []
    m = meter(admin, Clock(), max_attempts=2)
    assert m.sample({"orders": 2})
    assert admin.asked == [2, 1]
    assert dict(m.samples[0].ends) == {("orders", 0): 5, ("orders", 1): 9}


def test_a_partition_still_failing_is_left_out_and_logged() -> None:
    admin = Flaky({"orders": [[1], [2]]}, ends={("orders", 0): 5, ("orders", 1): 9})
    admin.asked, admin.flaky = [], 10
    m = meter(admin, Clock(), max_attempts=3)
    with structlog.testing.capture_logs() as logs:
        assert m.sample({"orders": 2})
    assert admin.asked == [2, 1, 1]
    assert dict(m.samples[0].ends) == {("orders", 0): 5}
    (event,) = [e for e in logs if e["event"].startswith("traffic sample")]
    assert event["errors"] == ["LEADER_NOT_AVAILABLE"] and event["example"] == ["orders-1"]


def test_brokers_down_skip_the_sample_without_raising() -> None:
    admin = FakeAdmin({"orders": [[1]]}, down=True)
    m = meter(admin, Clock(), max_attempts=2)
    with structlog.testing.capture_logs() as logs:
        assert not m.sample({"orders": 1})
    assert m.samples == ()
    assert [e["event"] for e in logs] == ["traffic sample failed; skipped"]


def test_one_attempt_by_default_and_leaderless_partitions_are_not_asked() -> None:
    admin = Flaky({"orders": [[1], [2], [3]]}, ends={("orders", 0): 5, ("orders", 1): 9, ("orders", 2): 4})
    admin.asked = []
    m = meter(admin, Clock())
    assert m.sample({"orders": 3}, leaderless=[("orders", 2)])
    assert admin.asked == [2]  # orders-2 skipped; orders-1 failed once and waits for the next cycle
    assert dict(m.samples[0].ends) == {("orders", 0): 5}
    assert not m.sample({"orders": 1}, leaderless=[("orders", 0)])


class Slow(FakeAdmin):
    """ListOffsets that takes the next of ``took`` seconds of ``clock``; the brokers read their offsets
    at the middle of the request (``ends_at`` gives them for a moment)."""

    clock: Clock
    took: list[float]
    ends_at: Any

    def list_offsets(self, topic_partition_offsets: dict[Any, Any], **kw: Any) -> dict[Any, Future[Any]]:
        took = self.took.pop(0)
        self.ends = self.ends_at(self.clock.now + took / 2)
        self.clock.now += took
        return super().list_offsets(topic_partition_offsets, **kw)


def test_a_sample_is_stamped_at_the_middle_of_its_request() -> None:
    """A steady 100 records/s; the first request answers at once, the last takes 2 s (a loaded broker).
    Stamped at their start, the samples would read 9 s of writing as 8 s's worth (112.5/s); stamped at
    their middle, the rate is exact."""
    admin = Slow({"orders": [[1]]})
    clock = Clock()
    admin.clock, admin.took = clock, [0.0, 0.0, 2.0]
    admin.ends_at = lambda t: {("orders", 0): round(100 * t)}
    m = meter(admin, clock, window_s=10)
    for step in range(3):
        clock.now = 4.0 * step
        assert m.sample({"orders": 1})
    assert [s.taken_at for s in m.samples] == [0.0, 4.0, 9.0]
    assert m.traffic({"orders": 1}) == {"orders": (100.0 * 100,)}
