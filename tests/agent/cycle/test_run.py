"""The agent's cycle with fake clients: alerts (initial state, change, recovery, webhook), registrations that
change, expire and disappear, discovered members, readiness and metrics.  The same loop runs against the
embedded cluster in integration/."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from rackplan.agent.core.logging import configure
from rackplan.agent.groups.registry import decode_registration
from rackplan.agent.kafka.exceptions import PublishError
from rackplan.agent.protocol.registrations import registration_key
from rackplan.agent.runtime.loop import Agent, CycleReport
from rackplan.agent.settings.sections import Settings
from rackplan.agent.testing import TP, FakeAdmin, FakePublisher, GroupDesc, MemberAssignment, MemberDesc


def member(mid: str, rack: str, topics: list[str]) -> dict[str, Any]:
    return {"member_id": mid, "rack": rack, "topics": topics}


def group(
    gid: str, racks: str = "ab", topics: list[str] | None = None, assignor: str = "range"
) -> dict[str, Any]:
    topics = topics or ["t"]
    return {
        "group_id": gid,
        "assignor": assignor,
        "members": [member(f"{gid}-{r}", f"az-{r}", topics) for r in racks],
    }


def make_agent(
    admin: FakeAdmin, groups: list[dict[str, Any]], posts: list[Any] | None = None, **extra: Any
) -> tuple[Agent, FakePublisher, io.StringIO]:
    buf = io.StringIO()
    configure("json", "info", stream=buf)
    doc: dict[str, Any] = {
        "consumer_groups": groups,
        "change_persist_polls": 1,
        "alerts": {
            "cross_rack_threshold": 0.25,
            "worsen_delta": 0.1,
            "cooldown_s": 0,
            "for_s": 0,
            "keep_firing_for_s": 0,
        },
        "metadata": {"max_attempts": 1},
        **extra,
    }
    clock = [1_000_000.0]

    def post(url: str, body: bytes, headers: Any, timeout: float) -> int:
        assert posts is not None
        posts.append(json.loads(body))
        return 200

    if posts is not None:
        doc["webhook"] = {"url": "http://alertmanager.invalid/api/v2/alerts"}
    publisher = FakePublisher()
    agent = Agent(
        Settings.model_validate(doc),
        admin=admin,
        publisher=publisher,
        clock=lambda: clock[0],
        webhook_post=post,
    )
    agent.tick = clock  # type: ignore[attr-defined]
    agent.begin([])
    return agent, publisher, buf


def cycle(agent: Agent, seconds: float = 30.0) -> CycleReport:
    agent.tick[0] += seconds  # type: ignore[attr-defined]
    return agent.run_once()


def register(agent: Agent, gid: str, mid: str, rack: str = "az-a", **group_fields: Any) -> str:
    """What a consumer's own registration record does once read from the topic."""
    value = {"schema": 1, "group_id": gid, "member_id": mid, "rack": rack, "topics": ["t"], **group_fields}
    key = registration_key("consumer", gid, mid)
    now_ms = int(agent.tick[0] * 1000)  # type: ignore[attr-defined]
    agent.term.store.apply(key, decode_registration(key, json.dumps(value).encode(), now_ms), now_ms)
    return key


def keys(events: Any) -> list[tuple[str, str]]:
    return [(e.key, e.status) for e in events]


def test_a_group_whose_best_plan_is_cross_rack_at_start_is_reported_unfixable_once() -> None:
    # Partitions live in az-c only; members of 'bad' are in az-a and az-b: every partition is cross-rack,
    # whatever the assignment: no page, one "unfixable" report (issue 12: it was posted 126 times).
    admin = FakeAdmin({"t": [[3], [3]], "u": [[1], [2]]})
    agent, pub, _ = make_agent(admin, [group("bad"), group("good", topics=["u"])])
    first = cycle(agent)
    assert keys(first.alerts) == [("consumer/bad", "unfixable")]
    ev = first.alerts[0]
    assert ev.previous == ev.current == 1.0 and ev.planned == 1.0 and ev.reason.startswith("initial state")
    assert all(cycle(agent).alerts == [] for _ in range(20))  # once
    assert [k for k, _ in pub.on("_rackplan.alerts")] == ["consumer/bad"]
    assert agent.metrics.get("rackplan_alerts_firing", {"kind": "consumer", "group": "bad"}) == 0
    assert agent.term.alerts.state("consumer/bad") == "unfixable"


def test_change_alert_compares_the_old_assignment_before_and_after_then_resolves() -> None:
    admin = FakeAdmin({"t": [[1], [1], [2], [2]]})
    agent, pub, _ = make_agent(admin, [group("g")])
    assert [p.generation for p in cycle(agent).published] == [1]
    admin.topics = {"t": [[2], [2], [1], [1]]}  # racks swap: the plan of record is all cross-rack now
    r = cycle(agent)
    assert r.confirmed and [(p.key, p.generation) for p in r.published] == [("consumer/g", 2)]
    (ev,) = r.alerts
    assert (ev.status, ev.previous, ev.current, ev.planned) == ("firing", 0.0, 1.0, 0.0)
    assert ev.reason.startswith("replica racks changed: t-0, t-1, t-2, t-3")
    (res,) = cycle(agent).alerts  # the new plan of record is local again
    assert (res.status, res.current, res.started_at) == ("resolved", 0.0, ev.started_at)
    assert [v["status"] for _, v in pub.on("_rackplan.alerts")] == ["firing", "resolved"]


def test_webhook_gets_firing_and_resolved_in_alertmanager_format() -> None:
    posts: list[Any] = []
    admin = FakeAdmin({"t": [[1], [1], [2], [2]]})
    agent, _, _ = make_agent(admin, [group("g")], posts=posts)
    cycle(agent)
    admin.topics = {"t": [[2], [2], [1], [1]]}
    cycle(agent)
    cycle(agent)
    assert agent.webhook is not None and agent.webhook.wait_idle(5)
    alerts = [a for body in posts for a in body]
    assert [a["labels"]["group"] for a in alerts] == ["g", "g"]
    firing, resolved = alerts
    assert firing["labels"] == resolved["labels"] and firing["startsAt"] == resolved["startsAt"]
    assert firing["endsAt"] > resolved["endsAt"]  # firing: in the future; resolved: when it resolved
    agent.close()


def test_registrations_from_the_topic_plan_replan_expire_and_tombstone() -> None:
    admin = FakeAdmin({"t": [[1], [2], [3]]})
    agent, pub, buf = make_agent(admin, [], registrations={"ttl_s": 120})
    assert cycle(agent).published == []

    register(agent, "dyn", "m-a", "az-a", assignor="range")
    r = cycle(agent)
    assert r.registered == ["consumer/dyn"]
    assert [(p.key, p.generation, p.reason) for p in r.published] == [("consumer/dyn", 1, "initial plan")]
    assert agent.term.regs[0].source == "topic"
    register(agent, "dyn", "m-b", "az-b", assignor="range")
    r = cycle(agent)
    assert r.reregistered == ["consumer/dyn"]
    assert [(p.generation, p.reason) for p in r.published] == [(2, "registration changed")]
    assert set(r.published[0].document["consumer_group"]["assignment"]) == {"m-a", "m-b"}
    assert cycle(agent).published == []
    register(
        agent, "dyn", "m-a", "az-a", assignor="range"
    )  # a heartbeat, 60 s after m-b registered: nothing to do
    assert cycle(agent).published == []
    r = cycle(agent, 70)  # m-b's record is 130 s old (ttl 120): expired; m-a's is 70 s old
    assert [(p.generation, p.reason) for p in r.published] == [(3, "registration changed")]
    assert agent.metrics.get("rackplan_registrations_expired_total") == 1
    r = cycle(agent, 60)  # m-a expired too: the group is gone
    assert r.unregistered == ["consumer/dyn"] and r.tombstoned == ["consumer/dyn"]
    assert pub.on("_rackplan.plans")[-1] == ("consumer/dyn", None)
    assert agent.metrics.series("rackplan_plan_generation") == {}
    assert "registrations expired" in buf.getvalue()


def test_an_unregistered_group_resolves_its_firing_alert() -> None:
    admin = FakeAdmin({"t": [[1], [2]]})
    agent, _, _ = make_agent(admin, [])
    regs = [register(agent, "dyn", "m-a", "az-a"), register(agent, "dyn", "m-b", "az-b")]
    assert cycle(agent).alerts == []
    admin.topics = {"t": [[2], [1]]}  # racks swap: the plan of record is all cross-rack, a new one is local
    assert keys(cycle(agent).alerts) == [("consumer/dyn", "firing")]
    for key in regs:
        agent.term.store.apply(key, None, 0)
    r = cycle(agent)
    assert keys(r.alerts) == [("consumer/dyn", "resolved")] and r.alerts[0].reason == "group unregistered"
    assert agent.metrics.series("rackplan_alerts_firing") == {}


def test_a_failed_tombstone_is_retried() -> None:
    admin = FakeAdmin({"t": [[1]]})
    agent, pub, _ = make_agent(admin, [])
    key = register(agent, "dyn", "m")
    cycle(agent)
    agent.term.store.apply(key, None, 0)
    pub.fail = True
    assert cycle(agent).tombstoned == []
    pub.fail = False
    assert cycle(agent).tombstoned == ["consumer/dyn"]


def discovered(*members: tuple[str, str, str, list[int]]) -> GroupDesc:
    return GroupDesc(
        "legacy",
        [
            MemberDesc(mid, cid, f"/{host}", MemberAssignment([TP("t", p) for p in parts]))
            for mid, cid, host, parts in members
        ],
    )


def test_members_that_do_not_register_are_discovered_with_mapped_racks() -> None:
    admin = FakeAdmin({"t": [[1], [1], [2], [2]]})
    admin.groups = {"legacy": discovered(("c-1", "legacy-1", "10.0.1.5", [0, 1, 2, 3]))}
    legacy = {"group_id": "legacy", "assignor": "range", "members": [], "topics": ["t"]}
    rules = [{"host": "10.0.1.0/24", "rack": "az-a"}, {"client_id": "legacy-b-*", "rack": "az-b"}]
    agent, _, _ = make_agent(admin, [legacy], rack_mapping=rules)
    r = cycle(agent)
    (plan,) = r.published
    assert plan.document["consumer_group"]["assignment"] == {"c-1": [["t", 0], ["t", 1], ["t", 2], ["t", 3]]}
    assert agent.term.regs[0].source == "file+discovered"
    # The real assignment is judged with the mapped rack: 2 of 4 partitions are in az-b; with one member
    # in az-a no plan does better: reported unfixable (once), not paged.
    assert keys(r.alerts) == [("consumer/legacy", "unfixable")] and r.alerts[0].current == 0.5
    admin.groups = {
        "legacy": discovered(
            ("c-1", "legacy-1", "10.0.1.5", [0, 1]), ("c-2", "legacy-b-2", "10.9.9.9", [2, 3])
        )
    }
    r = cycle(agent)
    assert [(p.generation, p.reason) for p in r.published] == [(2, "registration changed")]
    assert r.published[0].document["consumer_group"]["assignment"] == {
        "c-1": [["t", 0], ["t", 1]],
        "c-2": [["t", 2], ["t", 3]],
    }
    assert (
        r.alerts == [] and agent.term.alerts.state("consumer/legacy") == "ok"
    )  # a member in az-b: local now


def test_without_describe_groups_a_memberless_group_waits_and_the_reason_is_logged_once() -> None:
    admin = FakeAdmin({"t": [[1], [2]]}, groups=None)
    legacy = {"group_id": "legacy", "members": [], "topics": ["t"]}
    agent, _, buf = make_agent(admin, [legacy, group("good")])
    r = cycle(agent)
    assert [p.key for p in r.published] == ["consumer/good"]
    assert "no members registered or discovered" in r.skipped["consumer/legacy"]
    cycle(agent)
    cycle(agent)
    log = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert sum("not supported by the brokers" in e["event"] for e in log) == 1
    assert sum(e["event"] == "plan skipped" for e in log) == 1
    assert len(admin.groups_described) == 1  # not asked again until retry_unsupported_s


def test_the_real_assignment_drives_alerts_when_described() -> None:
    admin = FakeAdmin({"t": [[1], [1], [2], [2]]})
    agent, _, _ = make_agent(admin, [group("g")])
    # The group really runs the opposite of the plan: az-a's member reads az-b's partitions.
    admin.groups = {
        "g": GroupDesc("g", [
            MemberDesc("g-a", "c", "/10.0.0.1", MemberAssignment([TP("t", 2), TP("t", 3)])),
            MemberDesc("g-b", "c", "/10.0.0.2", MemberAssignment([TP("t", 0), TP("t", 1)])),
        ])
    }  # fmt: skip
    r = cycle(agent)
    (ev,) = r.alerts
    assert (ev.status, ev.current, ev.planned) == ("firing", 1.0, 0.0)


def test_ready_only_after_a_complete_snapshot() -> None:
    admin = FakeAdmin({"t": [[1]]})
    agent, _, _ = make_agent(admin, [group("g")])
    admin.down = True
    assert not cycle(agent).ok and not agent.ready
    assert agent.metrics.get("rackplan_ready") == 0
    admin.down = False
    assert cycle(agent).ok and agent.ready and agent.metrics.get("rackplan_ready") == 1


def test_metrics_by_group_and_rack_without_member_ids() -> None:
    admin = FakeAdmin({"t": [[1], [1], [2], [3]]})
    agent, _, _ = make_agent(admin, [group("g", racks="abc", assignor="range")])
    cycle(agent)
    text = agent.metrics.render()
    assert 'rackplan_brokers{rack="az-a"} 1' in text
    assert 'rackplan_registrations{kind="consumer",source="file"} 1' in text
    assert "rackplan_snapshot_partitions 4" in text
    series = {
        (dict(k)["rack"], dict(k)["locality"]): v
        for k, v in agent.metrics.series("rackplan_assigned_partitions").items()
    }
    assert sum(series.values()) == 4
    total_cross = sum(v for (_, loc), v in series.items() if loc == "cross_rack")
    assert total_cross == agent.metrics.get(
        "rackplan_cross_rack_partitions", {"kind": "consumer", "group": "g"}
    )
    assert "g-a" not in text and "g-b" not in text
    admin.topics = {"t": [[2], [1], [2], [3]]}
    cycle(agent)
    assert agent.metrics.get("rackplan_topic_rack_changes_total", {"topic": "t"}) == 1
    assert agent.metrics.get("rackplan_metadata_changes_total", {"change": "replica_racks"}) == 1


@pytest.fixture(autouse=True)
def _restore_logging() -> Any:
    yield
    import sys

    configure("json", "warning", stream=sys.__stderr__)


def test_groups_endpoint_lists_sources_and_unusable_registrations() -> None:
    admin = FakeAdmin({"t": [[1], [2]]})
    agent, _, buf = make_agent(admin, [group("g")])
    key = registration_key("streams", "app", "p-1")
    value = {"schema": 1, "application_id": "app", "process_id": "p-1", "rack": "az-a"}
    now_ms = int(agent.tick[0] * 1000)  # type: ignore[attr-defined]
    agent.term.store.apply(key, decode_registration(key, json.dumps(value).encode(), now_ms), now_ms)
    cycle(agent)
    cycle(agent)
    listed = agent.status().groups_json()
    assert [(g["key"], g.get("source"), g.get("members")) for g in listed] == [
        ("consumer/g", "file", 2),
        ("streams/app", None, None),
    ]
    assert "subtopologies" in listed[1]["problem"]
    assert buf.getvalue().count("registration not usable") == 1  # logged once, not every cycle


class SilentTail:
    """A registrations tail whose partition leader is away: nothing arrives, the end cannot be confirmed."""

    def __init__(self, caught_up: bool) -> None:
        self.caught_up = caught_up
        self.asked = 0

    def read_new(self, max_records: int = 100_000) -> tuple[list[Any], list[str]]:
        return [], []

    def read_available(self, timeout_s: float) -> tuple[list[Any], bool]:
        self.asked += 1
        if not self.caught_up:
            raise PublishError(
                "topic '_rackplan.registrations' partition 0: end offset unknown: LEADER_NOT_AVAILABLE"
            )
        return [], True

    def close(self) -> None:
        return None


def test_registrations_do_not_expire_while_the_topic_cannot_be_read_to_its_end() -> None:
    """Found on real Kafka: a broker restart silenced the registrations partition it led, the agent expired
    members who were still reading and planned everything to one of them (two owners at once)."""
    admin = FakeAdmin({"t": [[1], [2], [3]]})
    agent, _pub, buf = make_agent(admin, [], registrations={"ttl_s": 120})
    register(agent, "dyn", "m-a", "az-a", assignor="range")
    register(agent, "dyn", "m-b", "az-b", assignor="range")
    assert cycle(agent).registered == ["consumer/dyn"]
    tail = SilentTail(caught_up=False)
    agent.intake.tail = tail  # type: ignore[assignment]
    agent.term.reg_synced = True
    r = cycle(agent, 130)  # both records are past the TTL, but nothing says they were not refreshed
    assert r.unregistered == [] and r.published == [] and tail.asked == 1
    assert agent.metrics.get("rackplan_registrations_expired_total") in (None, 0)
    assert "nothing expires this cycle" in buf.getvalue()
    tail.caught_up = True  # read to the end, and still nothing new: now they are gone
    r = cycle(agent, 1)
    assert r.unregistered == ["consumer/dyn"]
    assert agent.metrics.get("rackplan_registrations_expired_total") == 2


class PlanTail:
    """The plan topic's new records, as a tail returns them."""

    def __init__(self, records: list[Any]) -> None:
        self.records = records

    def read_new(self, max_records: int = 100_000) -> tuple[list[Any], list[str]]:
        out, self.records = self.records, []
        return out, []

    def close(self) -> None:
        return None


def test_records_on_the_plan_topic_not_written_by_this_agent_are_reported() -> None:
    from rackplan.agent.kafka.publisher import LEASE_GROUP_HEADER, WRITER_HEADER
    from rackplan.agent.kafka.tail import RawRecord
    from rackplan.agent.protocol.plans import decode_record

    admin = FakeAdmin({"t": [[1], [2], [3]]})
    agent, _pub, buf = make_agent(admin, [])
    mine = ((WRITER_HEADER, agent.agent_id.encode()), (LEASE_GROUP_HEADER, b""))
    plan = json.dumps(
        {
            "schema": 1,
            "generation": 7,
            "consumer_group": {"group_id": "g", "assignment": {}, "revoked": {}},
            "stats": {},
        }
    ).encode()
    # Generation 7 is one the agent wrote (a record with our header above every generation we wrote is a copy:
    # tests/agent/test_forged_records.py).
    agent.term.book.apply("consumer/g", decode_record(b"consumer/g", plan))
    agent.plan_tail = PlanTail(  # type: ignore[assignment]
        [
            RawRecord(0, 1, b"consumer/g", plan, 1, "p", mine),  # our own: not counted
            RawRecord(0, 2, b"consumer/g", None, 1, "p", ()),  # a tombstone with no writer
            RawRecord(
                0, 3, b"consumer/g", plan, 1, "p", ((WRITER_HEADER, b"other"), (LEASE_GROUP_HEADER, b""))
            ),
        ]
    )
    cycle(agent)
    assert agent.metrics.get("rackplan_foreign_writers_total", {"topic": "plans"}) == 2
    lines = [json.loads(x) for x in buf.getvalue().splitlines() if "foreign writer on the plan topic" in x]
    assert [(x["tombstone"], x["writer"], x["generation"]) for x in lines] == [
        (True, "unknown (no rackplan header)", None),
        (False, "other", 7),
    ]
