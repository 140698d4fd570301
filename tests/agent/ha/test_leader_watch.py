"""What a standby knows of who leads (issue 28): the newest heartbeat of the lease topic, read by a tail."""

from __future__ import annotations

from typing import Any

from rackplan.agent.core.logging import get_logger
from rackplan.agent.ha.leader_watch import LeaderWatch, Standby
from rackplan.agent.kafka.exceptions import TopicReadError
from rackplan.agent.kafka.tail import RawRecord
from rackplan.agent.protocol.lease import HEARTBEAT_KEY, Heartbeat

NOW_MS = 1_800_000_000_000


def record(
    hb: Heartbeat | None, offset: int, seen_ms: int | None = None, key: bytes = HEARTBEAT_KEY
) -> RawRecord:
    value = None if hb is None else hb.encode()
    return RawRecord(
        0, offset, key, value, seen_ms if seen_ms is not None else (hb.timestamp_ms if hb else None)
    )


class FakeTail:
    """The lease topic: batches handed out in order; ``fail`` raises instead (an outage)."""

    def __init__(self, *batches: list[RawRecord]) -> None:
        self.batches = list(batches)
        self.fail = False
        self.closed = False
        self.opened_reads = 0

    def _next(self) -> list[RawRecord]:
        if self.fail:
            raise TopicReadError("topic '_rackplan.lease' unavailable", "LEADER_NOT_AVAILABLE")
        return self.batches.pop(0) if self.batches else []

    def read_available(self, timeout_s: float) -> tuple[list[RawRecord], bool]:
        self.opened_reads += 1
        return self._next(), True

    def read_new(self, max_records: int = 100_000) -> tuple[list[RawRecord], list[str]]:
        return self._next(), []

    def close(self) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def watch(tails: list[FakeTail], clock: Clock, every_s: float = 1.0) -> LeaderWatch:
    opened = iter(tails)

    def open_tail() -> Any:
        return next(opened)

    return LeaderWatch(open_tail, "_rackplan.lease", None, every_s, 5.0, get_logger("t"), monotonic=clock)


def test_the_newest_epoch_wins_and_the_watch_keeps_up() -> None:
    a5 = Heartbeat("agent-a", 5, NOW_MS - 4_000, 1.0, "agents")
    b6 = Heartbeat("agent-b", 6, NOW_MS - 2_000, 1.0, "agents")
    a5_late = Heartbeat("agent-a", 5, NOW_MS - 1_000, 1.0, "agents")  # a deposed leader's straggler
    clock = Clock()
    tail = FakeTail([record(a5, 0), record(None, 1, key=b"junk")], [record(b6, 2), record(a5_late, 3)])
    w = watch([tail], clock)
    assert w.leader is None
    w.refresh()
    assert w.leader == a5 and tail.opened_reads == 1  # read to its end when opened
    w.refresh()  # within every_s: not read again
    assert w.leader == a5
    clock.t = 1.0
    w.refresh()
    assert w.leader == b6


def test_an_outage_keeps_the_last_leader_and_reopens_the_tail() -> None:
    hb = Heartbeat("agent-a", 3, NOW_MS, 1.0)
    clock = Clock()
    first, second = FakeTail([record(hb, 0)]), FakeTail([record(Heartbeat("agent-b", 4, NOW_MS, 1.0), 1)])
    w = watch([first, second], clock)
    w.refresh()
    first.fail = True
    clock.t = 2.0
    w.refresh()  # no exception: logged, asked again later
    assert w.leader == hb and first.closed
    clock.t = 4.0
    w.refresh()
    assert w.leader is not None and w.leader.agent_id == "agent-b" and second.opened_reads == 1
    w.close()
    assert second.closed


def test_the_standby_view_says_who_leads_how_long_ago_and_where_the_plans_are() -> None:
    hb = Heartbeat("host-1-77", 9, NOW_MS - 5_000, 1.0, "agents", seen_ms=NOW_MS - 2_500)
    view = Standby("host-2-88", "_rackplan.lease", "_rackplan.plans", hb, NOW_MS).as_json()
    assert view["role"] == "standby" and view["agent_id"] == "host-2-88"
    assert view["leader"] == {
        "agent_id": "host-1-77",
        "epoch": 9,
        "heartbeat_age_s": 2.5,  # by the broker's timestamp
        "live": True,
        "released": False,
    }
    assert view["plan_topic"] == "_rackplan.plans" and "GET /v1/plans" in view["hint"]
    stale = Standby("b", "l", "p", Heartbeat("a", 1, NOW_MS - 60_000, 1.0), NOW_MS).as_json()
    assert stale["leader"]["live"] is False and stale["leader"]["heartbeat_age_s"] == 60.0
    assert Standby("b", "l", "p", None, NOW_MS).as_json()["leader"] is None


def test_a_standby_that_led_until_now_does_not_show_its_own_heartbeat_live() -> None:
    # Its lease was lost; the new leader is still starting (replays) and has written no heartbeat yet.
    own = Heartbeat("host-2-88", 9, NOW_MS - 1_000, 30.0, "agents", seen_ms=NOW_MS - 1_000)
    view = Standby("host-2-88", "_rackplan.lease", "_rackplan.plans", own, NOW_MS).as_json()
    assert view["role"] == "standby" and view["leader"]["agent_id"] == "host-2-88"
    assert view["leader"]["live"] is False, "a standby saying that it leads, live"
