"""Measured traffic in the cycle: a plan for traffic alone when it saves enough (reason ``traffic shifted:``),
none when it saves too little, the bytes and dollars per group in /metrics and /v1/plans, and, without
measured traffic, plans byte for byte as with traffic off."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from rackplan.agent.cycle.traffic_step import verdict
from rackplan.agent.runtime.check import selector_finding
from rackplan.agent.runtime.loop import Agent
from rackplan.agent.testing import FakeAdmin, FakePublisher
from rackplan.agent.traffic.pricing import dollars_per_month
from rackplan.agent.traffic.selector import RACK_AWARE

from ..traffic.test_reads import OffsetsAdmin
from ..traffic.test_selector import SelectorAdmin
from .test_run import cycle, group, make_agent

#: t-0..t-2 in az-a, t-3 in az-b: with two partitions each, m-b reads t-3 and one of t-0..t-2 across racks
TOPICS = {"t": [[1], [1], [1], [2]]}
RECORD_BYTES = 100.0


def bytes_group(**fields: Any) -> dict[str, Any]:
    return {
        "group_id": "g",
        "assignor": "rack-optimal",
        "members": [
            {"member_id": "m-a", "rack": "az-a", "topics": ["t"]},
            {"member_id": "m-b", "rack": "az-b", "topics": ["t"]},
        ],
        **fields,
    }


def traffic_agent(admin: FakeAdmin, group: dict[str, Any], **traffic: Any) -> tuple[Agent, FakePublisher]:
    settings = {
        "window_s": 100,
        "record_bytes": RECORD_BYTES,
        "replan_min_bytes_per_second": 10_000,
        **traffic,
    }
    agent, pub, _ = make_agent(admin, [group], traffic=settings)
    meter = agent.io.traffic
    assert meter is not None
    meter.clock = lambda: agent.tick[0]  # type: ignore[attr-defined]
    return agent, pub


def crossing(pub: FakePublisher) -> list[int]:
    """Partitions of t the newest plan gives m-b (in az-b) that live in az-a."""
    (_, value), *_ = reversed(pub.on("_rackplan.plans"))
    return sorted(p for _, p in value["consumer_group"]["assignment"]["m-b"] if p != 3)


def produce(admin: FakeAdmin, hot: int, seconds: float, step: int) -> None:
    """1,000 records/s on t-``hot``, 1/s on the other partitions of t, for ``step`` periods of ``seconds``."""
    admin.ends = {("t", p): int(step * seconds * (1000 if p == hot else 1)) for p in range(4)}


def test_a_plan_for_traffic_alone_moves_the_hot_partition_home_and_says_why() -> None:
    admin = FakeAdmin(TOPICS)
    agent, pub = traffic_agent(admin, bytes_group(objective="bytes"))
    produce(admin, 0, 30, 0)
    assert [p.generation for p in cycle(agent).published] == [1]  # the first plan: no traffic measured yet
    (hot,) = crossing(pub)  # the az-a partition m-b reads across racks: now it becomes the hot one
    produce(admin, hot, 30, 1)
    report = cycle(agent)
    (rec,) = report.published
    light = RECORD_BYTES * 1  # 1 record/s
    assert rec.generation == 2 and rec.reason == (
        f"traffic shifted: cross-rack bytes/s {RECORD_BYTES * 1000:.0f} -> {light:.0f} "
        f"(saves {RECORD_BYTES * 999:.0f}, 100%)"
    )
    assert crossing(pub) != [hot]
    stats = rec.document["stats"]
    assert stats["cross_rack_bytes_per_s"] == light and stats["optimal"] is True
    labels = {"kind": "consumer", "group": "g"}
    for assignment in ("current", "planned"):
        one = {**labels, "assignment": assignment}
        assert agent.metrics.get("rackplan_cross_rack_bytes_per_second", one) == light
        assert agent.metrics.get("rackplan_cross_rack_dollars_per_month", one) == pytest.approx(
            dollars_per_month(light, 0.01)
        )
    assert agent.metrics.get("rackplan_traffic_partitions_measured") == 4
    shown = agent.status().plans_json()["consumer/g"]["traffic"]
    assert shown["planned"]["cross_rack_bytes_per_s"] == light and shown["current_source"] == "plan"
    assert shown["planned"]["bytes_per_s"] == RECORD_BYTES * (1000 + 3)
    produce(admin, hot, 30, 2)
    assert cycle(agent).published == []  # the plan of record is the bytes-optimal one: nothing to save


def test_a_plan_for_traffic_alone_that_saves_too_little_is_not_published() -> None:
    admin = FakeAdmin(TOPICS)
    agent, pub = traffic_agent(admin, bytes_group(balance="bytes"), replan_min_bytes_per_second=200_000)
    produce(admin, 0, 30, 0)
    cycle(agent)
    (hot,) = crossing(pub)
    for step in range(1, 6):  # the plan is weighed again each window (100 s), published never
        produce(admin, hot, 30, step)
        assert cycle(agent).published == []
    one = {"kind": "consumer", "group": "g", "assignment": "planned"}
    assert agent.metrics.get("rackplan_cross_rack_bytes_per_second", one) == RECORD_BYTES * 1000


def test_a_group_counting_partitions_gets_no_plan_for_traffic() -> None:
    admin = FakeAdmin(TOPICS)
    agent, pub = traffic_agent(admin, bytes_group())
    produce(admin, 0, 30, 0)
    cycle(agent)
    (hot,) = crossing(pub)
    for step in range(1, 6):
        produce(admin, hot, 30, step)
        assert cycle(agent).published == []
    one = {"kind": "consumer", "group": "g", "assignment": "current"}
    assert agent.metrics.get("rackplan_cross_rack_bytes_per_second", one) == RECORD_BYTES * 1000


@pytest.mark.parametrize("fields", [{}, {"objective": "bytes", "balance": "bytes"}])
def test_without_measured_traffic_every_record_is_as_with_traffic_off(fields: dict[str, Any]) -> None:
    """Brokers that answer no ListOffsets, and traffic.enabled off: the same records, byte for byte."""
    published: list[list[tuple[str, Any]]] = []
    for enabled in (True, False):
        admin = FakeAdmin(TOPICS)
        agent, pub, _ = make_agent(admin, [bytes_group(**fields)], traffic={"enabled": enabled})
        assert (agent.io.traffic is not None) is enabled
        for _ in range(3):
            cycle(agent)
        admin.topics = {"t": [[2], [1], [1], [1]]}  # a change: planned again
        for _ in range(3):
            cycle(agent)
        records = [(k, v) for k, v in pub.on("_rackplan.plans")]
        for _, v in records:
            v["stats"].pop("elapsed_ms")  # the assignor's own time: the one field that differs run to run
        published.append(records)
        assert "rackplan_cross_rack_bytes_per_second{" not in agent.metrics.render()
    assert published[0] == published[1] and len(published[0]) == 2


def test_a_locality_alert_says_what_the_cross_rack_reads_cost() -> None:
    """Racks swap under a local plan: the alert's current assignment (the replaced plan) reads every byte
    across racks; the event and its record carry those bytes/s and their dollars."""
    admin = FakeAdmin({"t": [[1], [1], [2], [2]]})
    agent, pub, _ = make_agent(admin, [group("g")], traffic={"record_bytes": RECORD_BYTES})
    meter = agent.io.traffic
    assert meter is not None
    meter.clock = lambda: agent.tick[0]  # type: ignore[attr-defined]
    for step in range(2):
        admin.ends = {("t", p): int(step * 30 * 10 * (p + 1)) for p in range(4)}  # 10, 20, 30, 40 records/s
        cycle(agent)
    admin.topics = {"t": [[2], [2], [1], [1]]}
    admin.ends = {("t", p): int(2 * 30 * 10 * (p + 1)) for p in range(4)}
    (ev,) = cycle(agent).alerts
    total = RECORD_BYTES * (10 + 20 + 30 + 40)
    assert ev.status == "firing" and ev.current == 1.0
    assert ev.cross_rack_bytes_per_s == total
    assert ev.cross_rack_dollars_per_month == pytest.approx(dollars_per_month(total, 0.01))
    (_, value), *_ = reversed(pub.on("_rackplan.alerts"))
    assert value["cross_rack_dollars_per_month"] == round(dollars_per_month(total, 0.01), 2)


def test_when_assignment_cannot_help_the_unfixable_report_carries_the_floor() -> None:
    """The topic moves to az-c, where no member is: every byte crosses whatever the plan; the one-off
    report, /v1/plans and the floor series say so, in bytes/s and dollars."""
    admin = FakeAdmin({"t": [[1], [2]]})
    agent, _, _ = make_agent(admin, [group("g")], traffic={"record_bytes": RECORD_BYTES})
    meter = agent.io.traffic
    assert meter is not None
    meter.clock = lambda: agent.tick[0]  # type: ignore[attr-defined]
    for step in range(2):
        admin.ends = {("t", 0): step * 30 * 10, ("t", 1): step * 30 * 30}  # 10 and 30 records/s
        cycle(agent)
    shown = agent.status().plans_json()["consumer/g"]["traffic"]
    assert (
        shown["assignment_can_help"] == "no cross-rack bytes"
        and shown["unfixable_cross_rack_bytes_per_s"] == 0
    )
    admin.topics = {"t": [[3], [3]]}
    admin.ends = {("t", 0): 2 * 30 * 10, ("t", 1): 2 * 30 * 30}
    events = cycle(agent).alerts
    total = RECORD_BYTES * (10 + 30)
    (ev,) = [e for e in events if e.status == "unfixable"]
    assert ev.cross_rack_bytes_per_s == total
    assert ev.cross_rack_dollars_per_month == pytest.approx(dollars_per_month(total, 0.01))
    shown = agent.status().plans_json()["consumer/g"]["traffic"]
    assert shown["assignment_can_help"] == "not fixable by assignment"
    assert shown["unfixable_cross_rack_bytes_per_s"] == total and shown["fixable_cross_rack_bytes_per_s"] == 0
    one = {"kind": "consumer", "group": "g", "assignment": "floor"}
    assert agent.metrics.get("rackplan_cross_rack_bytes_per_second", one) == total


def test_whether_assignment_can_help() -> None:
    assert verdict(0.0, 0.0, 0.01)["assignment_can_help"] == "no cross-rack bytes"
    fixable = verdict(300.0, 100.0, 0.01)
    assert fixable["assignment_can_help"] == "fixable by assignment"
    assert (
        fixable["fixable_cross_rack_bytes_per_s"] == 200.0
        and fixable["unfixable_cross_rack_bytes_per_s"] == 100.0
    )
    stuck = verdict(1e6, 1e6, 0.01)
    assert stuck["assignment_can_help"] == "not fixable by assignment"
    assert stuck["unfixable_cross_rack_dollars_per_month"] == round(dollars_per_month(1e6, 0.01), 2)


@pytest.mark.parametrize("broker_2", [RACK_AWARE, None])
def test_without_the_rack_aware_selector_a_nearest_replica_group_is_judged_by_its_leaders(
    broker_2: str | None,
) -> None:
    """Every partition led in az-a with a follower in az-b: with the rack-aware selector on every broker m-b
    reads its follower and nothing crosses; when broker 2 lacks it, m-b's reads go to the az-a leaders
    and its bytes are reported as crossing (in leader mode), with the selector's state."""
    admin = SelectorAdmin(
        {"t": [[1, 2], [1, 2], [1, 2], [1, 2]]}, selectors={1: RACK_AWARE, 2: broker_2, 3: RACK_AWARE}
    )
    agent, pub = traffic_agent(admin, bytes_group())
    for step in range(2):
        produce(admin, 0, 30, step)
        cycle(agent)
    (_, value), *_ = reversed(pub.on("_rackplan.plans"))
    m_b = sum(RECORD_BYTES * (1000 if p == 0 else 1) for _, p in value["consumer_group"]["assignment"]["m-b"])
    shown = agent.status().plans_json()["consumer/g"]["traffic"]
    state = "rack-aware" if broker_2 else "absent"
    assert agent.status().status_json()["replica_selector"]["state"] == state
    assert agent.metrics.get("rackplan_replica_selector", {"state": state}) == 1.0
    assert agent.metrics.get("rackplan_replica_selector", {"state": "unknown"}) == 0.0
    assert shown["replica_selector"] == state
    if broker_2:
        assert shown["judged_fetch_mode"] == "nearest-replica"
        assert shown["current"]["cross_rack_bytes_per_s"] == 0.0
        assert shown["assignment_can_help"] == "no cross-rack bytes"
    else:
        assert shown["judged_fetch_mode"] == "leader"
        assert shown["current"]["cross_rack_bytes_per_s"] == m_b > 0
        assert shown["assignment_can_help"] == "fixable by assignment"  # m-a, in the leaders' rack, could
    finding, problems = selector_finding(agent.status().selector, agent.status().groups)
    assert finding is not None and finding["state"] == state
    assert problems == (
        []
        if broker_2
        else [
            f"brokers 2 lack replica.selector.class={RACK_AWARE}: the nearest-replica groups consumer/g read "
            "from partition leaders (their bytes figures are judged in leader mode)"
        ]
    )


@dataclass
class CommittingAdmin(FakeAdmin):
    """A FakeAdmin whose groups commit offsets: group id -> (topic, partition) -> offset."""

    committed: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)

    def list_consumer_group_offsets(self, requests: list[Any], **_kw: Any) -> dict[str, Any]:
        return {
            r.group_id: OffsetsAdmin(dict(self.committed)).list_consumer_group_offsets([r])[r.group_id]
            for r in requests
        }


def test_a_group_behind_is_reported_at_what_it_reads_and_planned_at_what_is_produced() -> None:
    """Every partition of t gets 100 records/s; group g commits 10/s on each (it is behind). Its "read"
    figures are a tenth of "current"; its plans are the same, record for record, as when it commits
    nothing (the plan's objective stays the produce rate)."""
    runs = []
    for commits in (True, False):
        admin = CommittingAdmin(TOPICS)
        agent, pub = traffic_agent(admin, bytes_group(objective="bytes"))
        for step in range(3):
            admin.ends = {("t", p): step * 30 * 100 for p in range(4)}
            admin.committed = {"g": {("t", p): step * 30 * 10 for p in range(4)}} if commits else {}
            cycle(agent)
        shown = agent.status().plans_json()["consumer/g"]["traffic"]
        records = [(k, {**v, "stats": {**v["stats"], "elapsed_ms": 0}}) for k, v in pub.on("_rackplan.plans")]
        runs.append(records)
        one = {"kind": "consumer", "group": "g", "assignment": "read"}
        if commits:
            current, read = shown["current"], shown["read"]
            assert (
                current["bytes_per_s"] == 4 * 100 * RECORD_BYTES
                and read["bytes_per_s"] == 4 * 10 * RECORD_BYTES
            )
            assert current["cross_rack_bytes_per_s"] == 100 * RECORD_BYTES  # m-b reads one az-a partition
            assert read["cross_rack_bytes_per_s"] == 10 * RECORD_BYTES
            assert agent.metrics.get("rackplan_cross_rack_bytes_per_second", one) == 10 * RECORD_BYTES
        else:
            assert shown["read"] is None
            assert 'assignment="read"' not in agent.metrics.render()
    assert runs[0] == runs[1] and len(runs[0]) == 1
