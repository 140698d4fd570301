"""The standby's rejoin goes by the heartbeat its leader watch already read (issue 24's stalled lease)."""

from __future__ import annotations

import threading

import structlog

from rackplan.agent.ha.rejoin import rejoin_if_orphaned
from rackplan.agent.kafka.tail import RawRecord
from rackplan.agent.metrics.registry import Metrics
from rackplan.agent.protocol.lease import Heartbeat
from rackplan.agent.settings.sections import Settings
from rackplan.agent.state.term import Wiring

from .test_leader_watch import NOW_MS, Clock, FakeTail, record, watch


class Lease:
    def __init__(self) -> None:
        self.rejoins = 0

    def rejoin(self) -> None:
        self.rejoins += 1


def wiring() -> Wiring:
    s = Settings.model_validate({"ha": {"enabled": True, "session_timeout_s": 6}})
    return Wiring(s, structlog.get_logger(), Metrics(), lambda: NOW_MS / 1000, threading.Event(), "agent-b")


def rejoined_after(*batches: list[RawRecord], fail: bool = False) -> tuple[int, float | None]:
    w, lease, clock = wiring(), Lease(), Clock()
    tail = FakeTail(*batches)
    tail.fail = fail
    lw = watch([tail], clock)
    lw.refresh()
    rejoin_if_orphaned(w, lease, lw, waited_s=12)
    return lease.rejoins, w.metrics.get("rackplan_lease_rejoins_total")


def test_a_live_holders_heartbeat_keeps_the_standby_in_place() -> None:
    live = Heartbeat("agent-a", 3, NOW_MS - 2_000, 1.0, "agents")
    assert rejoined_after([record(live, 0)]) == (0, 0.0)


def test_no_heartbeat_a_released_one_or_a_stale_one_means_nobody_holds_it() -> None:
    released = Heartbeat("agent-a", 3, NOW_MS - 2_000, 1.0, "agents", released=True)
    stale = Heartbeat("agent-a", 3, NOW_MS - 60_000, 1.0, "agents")
    for batch in ([], [record(released, 0)], [record(stale, 0)]):
        assert rejoined_after(batch) == (1, 1.0), batch


def test_a_watch_that_could_not_read_the_topic_cannot_tell_and_does_not_rejoin() -> None:
    assert rejoined_after([], fail=True) == (0, 0.0)
