"""The cycle's work at scale: what is computed once and reused, and what is published in one batch.

Each memo must be invisible: the same reports, metrics and plans as computing
everything again, with the work done only when an input changed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from rackplan.agent.cycle import alerting, plan_step
from rackplan.agent.kafka.exceptions import DeliveryUncertain, PlanTooLargeError
from rackplan.agent.kafka.publisher import WRITER_HEADER, Publisher
from rackplan.agent.kafka.tail import RawRecord
from rackplan.agent.runtime import watch
from rackplan.agent.testing import FakeAdmin
from tests.agent.cycle.test_run import PlanTail, cycle, group, make_agent
from tests.calls import counting


def test_publish_each_confirms_each_record_on_its_own_on_a_mock_cluster() -> None:
    pub = Publisher({"test.mock.num.brokers": 1}, 10_000)
    big = b"x" * 20_000  # beyond message.max.bytes: refused before it is sent
    outcomes = pub.publish_each("plans", [("a", b"1"), ("b", big), ("c", None)], 30)
    print(f"outcomes: {[None if o is None else type(o).__name__ for o in outcomes]}")
    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], PlanTooLargeError)
    with pytest.raises(PlanTooLargeError):  # publish_many: the one failure, as it is
        pub.publish_many("plans", [("a", b"2"), ("b", big)], 30)
    pub.publish_many("plans", [("a", b"3"), ("c", b"4")], 30)  # all confirmed: no error


def test_publish_each_reports_records_without_a_delivery_report_in_time_as_uncertain() -> None:
    pub = Publisher({"bootstrap.servers": "127.0.0.1:1", "message.timeout.ms": 60_000}, 10_000)
    outcomes = pub.publish_each("plans", [("a", b"1"), ("b", b"2")], 0.2)
    assert all(isinstance(o, DeliveryUncertain) for o in outcomes), outcomes
    pub._producer.purge()  # nothing is left queued for the interpreter's exit


def test_a_cycle_publishes_all_its_plans_in_one_batch() -> None:
    admin = FakeAdmin({"t": [[1], [2], [3]], "u": [[1], [2]]})
    agent, pub, _ = make_agent(admin, [group("g1"), group("g2", topics=["u"]), group("g3")])
    batches: list[list[str]] = []
    each = pub.publish_each

    def spy(topic: str, records: list[tuple[str, bytes | None]], timeout_s: float) -> Any:
        batches.append([k for k, _ in records])
        return each(topic, records, timeout_s)

    pub.publish_each = spy  # type: ignore[method-assign]
    report = cycle(agent)
    assert sorted(r.key for r in report.published) == ["consumer/g1", "consumer/g2", "consumer/g3"]
    assert batches == [["consumer/g1", "consumer/g2", "consumer/g3"]]


def test_a_skipped_plan_is_not_planned_again_until_its_inputs_change(monkeypatch: pytest.MonkeyPatch) -> None:
    topics: dict[str, Any] = {"t": [[1], [2], [3]]}
    admin = FakeAdmin(topics)
    # none of its topics exists yet (one missing topic among others is left out instead: test_operator_warnings.py)
    agent, _pub, _ = make_agent(admin, [group("g", topics=["later"])])
    plans = counting(monkeypatch, plan_step, "plan_for")
    reports = [cycle(agent) for _ in range(4)]
    print(f"plan_for calls over 4 cycles with its topic missing: {plans[0]}")
    assert plans[0] == 1
    assert all(list(r.skipped) == ["consumer/g"] for r in reports)
    assert len({r.skipped["consumer/g"] for r in reports}) == 1  # the same reason every cycle
    assert agent.metrics.get("rackplan_plan_failures_total", {"kind": "consumer"}) == 4
    topics["later"] = [[1], [2]]  # the topic appears (the admin's own mapping): planned at once
    report = cycle(agent)
    assert plans[0] == 2 and [r.key for r in report.published] == ["consumer/g"] and not report.skipped


def test_a_plan_skipped_for_an_assignor_error_is_tried_every_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    admin = FakeAdmin({"t": [[1], [2], [3]]})
    agent, _, _ = make_agent(admin, [group("g")])
    calls = [0]

    def broken(*_a: Any, **_k: Any) -> Any:
        calls[0] += 1
        raise RuntimeError("assignor bug")

    monkeypatch.setattr(plan_step, "plan_for", broken)
    for _ in range(3):
        assert list(cycle(agent).skipped) == ["consumer/g"]
    assert calls[0] == 3  # not a verdict on the inputs: it may pass


def test_own_plans_read_back_byte_for_byte_are_not_decoded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    admin = FakeAdmin({"t": [[1], [2], [3]]})
    agent, pub, _ = make_agent(admin, [group("g")])
    agent.plan_tail = PlanTail([])  # type: ignore[assignment]
    report = cycle(agent)
    (rec,) = report.published
    (topic_key, value) = next((k, v) for k, v in pub.on(agent.settings.plan_topic))
    raw = json.dumps(value).encode()  # what the fake kept, re-encoded: not the published bytes
    published = agent.term.groups["consumer/g"].sent
    mine = ((WRITER_HEADER, agent.agent_id.encode()),)
    decodes = counting(monkeypatch, watch, "decode_record")
    agent.plan_tail = PlanTail(  # type: ignore[assignment]
        [RawRecord(0, 1, b"consumer/g", published, 1, "p", mine)]
    )
    cycle(agent)
    assert decodes[0] == 0 and agent.term.groups["consumer/g"].sent is None
    agent.plan_tail = PlanTail([RawRecord(0, 2, b"consumer/g", raw, 1, "p", mine)])  # type: ignore[assignment]
    cycle(agent)
    assert decodes[0] == 1  # other bytes (or no memory of them): decoded as before
    assert topic_key == rec.key


def test_the_floor_of_a_firing_alert_is_computed_once_per_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every replica in az-a and az-b; members in az-c read everything cross-rack: the alert fires, unfixable.
    topics: dict[str, Any] = {"t": [[1], [2], [1], [2]]}
    admin = FakeAdmin(topics)
    agent, _, _ = make_agent(admin, [group("g", racks="c")])
    floors = counting(monkeypatch, alerting, "best_locality")
    first = cycle(agent)
    assert [(e.key, e.status) for e in first.alerts] == [("consumer/g", "unfixable")]
    after_first = floors[0]
    for _ in range(3):
        cycle(agent)
    assert floors[0] == after_first and agent.term.alerts.unfixable() == ["consumer/g"]
    topics["t"] = [
        [2],
        [1],
        [2],
        [1],
    ]  # another snapshot (same racks per partition set): computed again
    topics["x"] = [[1]]
    cycle(agent)
    assert floors[0] > after_first and agent.term.alerts.unfixable() == ["consumer/g"]


def test_a_registration_naming_too_many_topics_is_refused_with_its_count() -> None:
    from rackplan.agent.groups.registry import decode_registration
    from rackplan.agent.protocol.registrations import (
        MAX_REGISTRATION_TOPICS,
        RegistrationRecordError,
        consumer_registration,
    )

    names = [f"t{i:06d}" for i in range(MAX_REGISTRATION_TOPICS + 1)]
    key, value = consumer_registration("g", "m", rack="az-a", topics=names[:-1], timestamp_ms=1)
    entry = decode_registration(key, value, 1)
    assert entry is not None and len(entry.member["topics"]) == MAX_REGISTRATION_TOPICS
    key, value = consumer_registration("g", "m", rack="az-a", topics=names, timestamp_ms=1)
    with pytest.raises(RegistrationRecordError) as e:
        decode_registration(key, value, 1)
    print(f"refused: {e.value}")
    assert e.value.reason == "too_large" and f"names {MAX_REGISTRATION_TOPICS + 1} topics" in str(e.value)
    streams = {
        "schema": 1,
        "application_id": "app",
        "process_id": "p",
        "rack": "az-a",
        "subtopologies": [
            {"id": "0", "source_topics": names[:6000]},
            {"id": "1", "source_topics": ["x"], "changelog_topics": names[6000:]},
        ],
    }
    with pytest.raises(RegistrationRecordError, match="names 10002 topics"):
        decode_registration(b"streams/app/p", json.dumps(streams).encode(), 1)
