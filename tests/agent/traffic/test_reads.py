"""What a consumer group reads, from its committed offsets: its own pace (behind, idle, some partitions only),
over the same window and with the same rate code as the end offsets."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import structlog
from confluent_kafka import KafkaError, TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.agent.settings.traffic import TrafficSettings
from rackplan.agent.testing import done, kafka_error
from rackplan.agent.traffic.reads import GroupReads


class Answer:
    def __init__(self, offsets: dict[tuple[str, int], int]) -> None:
        self.topic_partitions = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]


@dataclass
class OffsetsAdmin:
    """ListConsumerGroupOffsets: group id -> its committed offsets, or a KafkaError code it fails with."""

    committed: dict[str, dict[tuple[str, int], int] | int] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def list_consumer_group_offsets(self, requests: list[Any], **_kw: Any) -> dict[str, Future[Any]]:
        (r,) = requests
        self.asked.append(r.group_id)
        got = self.committed.get(r.group_id, {})
        return {r.group_id: kafka_error(got) if isinstance(got, int) else done(Answer(got))}


def reads(admin: OffsetsAdmin, **settings: Any) -> GroupReads:
    s = TrafficSettings.model_validate({"window_s": 100, "record_bytes": 100, **settings})
    return GroupReads(admin, s, structlog.get_logger())


def test_a_group_behind_an_idle_one_and_one_reading_some_partitions() -> None:
    admin = OffsetsAdmin()
    r = reads(admin, topic_record_bytes={"u": 10})
    groups = {"behind": {"t"}, "idle": {"t"}, "some": {"t", "u"}, "none": {"t"}}
    for step in range(5):
        now = 20.0 * step
        admin.committed = {
            "behind": {("t", 0): int(now * 3), ("t", 1): int(now * 2)},  # 3/s and 2/s, whatever is produced
            "idle": {("t", 0): 500, ("t", 1): 700},  # stopped: offsets stand still
            "some": {("t", 1): int(now * 5), ("u", 0): 50 + int(now)},  # never t-0; "u" at 10 bytes
            "none": {},  # commits nothing (offsets kept elsewhere)
        }
        r.sample(groups, now)
    parts = {"t": 2, "u": 1}
    assert r.traffic("behind", {"t": 2}) == {"t": (300.0, 200.0)}
    assert r.traffic("idle", {"t": 2}) == {"t": (0.0, 0.0)}
    assert r.traffic("some", parts) == {"t": (0.0, 500.0), "u": (10.0,)}
    assert r.traffic("none", {"t": 2}) == {}
    r.sample({"idle": {"t"}}, 100.0)  # the others are no longer planned: forgotten
    assert set(r.samples) == {"idle"}


def test_a_failed_request_skips_that_sample_and_is_said_once() -> None:
    admin = OffsetsAdmin()
    r = reads(admin)
    with structlog.testing.capture_logs() as logs:
        for step in range(6):
            now = 10.0 * step
            failing = step in (1, 2, 3)
            admin.committed = {
                "g": KafkaError.COORDINATOR_NOT_AVAILABLE if failing else {("t", 0): int(now * 4)}
            }
            r.sample({"g": {"t"}}, now)
    assert r.traffic("g", {"t": 1}) == {"t": (400.0,)}
    assert [e["error"] for e in logs if e["log_level"] == "warning"] == ["COORDINATOR_NOT_AVAILABLE"]
    assert len(r.samples["g"]) == 3


@settings(max_examples=100, deadline=None)
@given(
    rate=st.integers(0, 10**5),
    base=st.integers(0, 10**9),
    times=st.lists(st.integers(0, 99), min_size=2, max_size=20, unique=True),
    failing=st.sets(st.integers(0, 19)),
)
def test_a_steady_reader_reads_its_commit_rate_exactly(
    rate: int, base: int, times: list[int], failing: set[int]
) -> None:
    """Offsets committed ``rate`` a second: that rate x the record size, whatever samples fail, as long as
    two in the window succeed (the same slope as the end offsets: rates.record_rates)."""
    times.sort()
    admin = OffsetsAdmin()
    r = reads(admin, window_s=1000)
    ok = [t for i, t in enumerate(times) if i not in failing]
    for i, t in enumerate(times):
        admin.committed = {"g": KafkaError._TRANSPORT if i in failing else {("t", 0): base + rate * t}}
        r.sample({"g": {"t"}}, float(t))
    got = r.traffic("g", {"t": 1})
    if len(ok) >= 2:
        assert got == {"t": (float(rate) * 100.0,)}
    else:
        assert got == {}
