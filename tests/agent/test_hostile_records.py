"""Issue 11 (A-D, G) with fake clients: poison records, one content per generation, trusted registrations,
forged heartbeats, bounded generations and epochs, foreign plan records.  The same behaviour against
librdkafka's mock cluster and real Kafka is in integration/test_hardening.py."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import rackplan.agent.kafka.exceptions as kafka_exceptions
from rackplan.agent.groups.registry import decode_registration
from rackplan.agent.kafka.exceptions import PublishError
from rackplan.agent.kafka.publisher import LEASE_GROUP_HEADER, WRITER_HEADER
from rackplan.agent.kafka.tail import RawRecord
from rackplan.agent.protocol.lease import HeartbeatError, decode_heartbeat
from rackplan.agent.protocol.plans import PlanDecodeError, decode_record
from rackplan.agent.protocol.registrations import (
    RegistrationRecordError,
    consumer_registration,
    registration_key,
)
from rackplan.agent.runtime.loop import Agent
from rackplan.agent.testing import FakeAdmin, FakePublisher
from tests.agent.cycle.test_run import PlanTail, cycle, group, make_agent
from tests.agent.follower.test_follower import LEASE, PLANS, REGS, FakeTail, Harness, plan

#: the issue's poison record: 100,000 nested arrays, ~200 kB
DEEP = 100_000
POISON = b'{"x":' + b"[" * DEEP + b"]" * DEEP + b"}"
#: what the publisher raises when a publish timed out (PublishError before the fix)
UNCERTAIN: type[PublishError] = getattr(kafka_exceptions, "DeliveryUncertain", PublishError)


def reg_value(gid: str, mid: str, rack: str = "az-a", **extra: Any) -> bytes:
    return json.dumps(
        {"schema": 1, "group_id": gid, "member_id": mid, "rack": rack, "topics": ["t"], **extra}
    ).encode()


def raw(
    key: bytes | None, value: bytes | None, ts: int | None = None, offset: int = 0, **kw: Any
) -> RawRecord:
    return RawRecord(0, offset, key, value, ts, **kw)


def now_ms(agent: Agent) -> int:
    return int(agent.tick[0] * 1000)  # type: ignore[attr-defined]


# ---- A: poison records -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "decode",
    [
        lambda v: decode_record(b"consumer/g", v),
        lambda v: decode_registration(b"consumer/g/m", v, 1),
        lambda v: decode_heartbeat(b"leader", v),
    ],
    ids=["plans", "registrations", "lease"],
)
def test_a_deeply_nested_record_is_refused_with_a_reason_not_a_recursion_error(decode: Any) -> None:
    t0 = time.perf_counter()
    with pytest.raises((PlanDecodeError, RegistrationRecordError, HeartbeatError)) as e:
        decode(POISON)
    elapsed = time.perf_counter() - t0
    print(f"{DEEP}-deep record ({len(POISON)} bytes) refused in {elapsed * 1000:.1f} ms: {e.value}")
    assert getattr(e.value, "reason", None) == "too_deep"
    assert elapsed < 2.0


def test_oversized_records_are_refused_before_parsing() -> None:
    big = b'{"schema":1,"pad":"' + b"x" * (1024 * 1024) + b'"}'
    with pytest.raises(RegistrationRecordError) as e:
        decode_registration(b"consumer/g/m", big, 1)
    assert e.value.reason == "too_large"
    with pytest.raises(HeartbeatError) as h:
        decode_heartbeat(b"leader", big)
    assert h.value.reason == "too_large"


def test_a_poison_registration_takes_none_of_its_neighbours() -> None:
    """Found: a RecursionError dropped the rest of the fetch (5 of 5 valid registrations lost)."""
    agent, _pub, buf = make_agent(FakeAdmin({"t": [[1], [2], [3]]}), [])
    ts = now_ms(agent)
    records = [
        raw(registration_key("consumer", "dyn", f"m-{i}").encode(), reg_value("dyn", f"m-{i}"), ts)
        for i in range(5)
    ]
    records.insert(2, raw(b"consumer/dyn/poison", POISON, ts))
    agent.intake.apply_raw(agent.term, records)
    r = cycle(agent, 1)
    applied = sorted(r.published[0].document["consumer_group"]["assignment"])
    skipped = agent.metrics.get(
        "rackplan_records_skipped_total", {"topic": "registrations", "reason": "too_deep"}
    )
    print(f"valid registrations applied: {len(applied)} of 5; poison records skipped: {skipped:g}")
    assert applied == [f"m-{i}" for i in range(5)]
    assert skipped == 1
    assert "nested deeper than" in buf.getvalue()


def test_a_running_agent_skips_poison_on_the_plan_and_lease_topics() -> None:
    agent, _pub, _buf = make_agent(FakeAdmin({"t": [[1]]}), [group("g", racks="a")])
    cycle(agent)

    agent.plan_tail = PlanTail([raw(b"consumer/g", POISON, topic="p")])  # type: ignore[assignment]
    agent.lease_tail = PlanTail([raw(b"leader", POISON, topic="l")])  # type: ignore[assignment]
    assert cycle(agent).ok
    m = agent.metrics
    assert m.get("rackplan_records_skipped_total", {"topic": "plans", "reason": "too_deep"}) == 1
    assert m.get("rackplan_records_skipped_total", {"topic": "lease", "reason": "too_deep"}) == 1
    assert agent.term.discrepancies() == {}, "a record followers skip too is no discrepancy"


def test_a_follower_survives_poison_in_its_constructor_and_in_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: PlanFollower raised RecursionError from its constructor and from poll()."""
    h = Harness(monkeypatch)
    f = h.follower(preload=[(PLANS, b"consumer/g", POISON), (LEASE, b"leader", POISON)])
    tail = FakeTail.instances[-1]
    h.heartbeat()
    tail.push(PLANS, b"consumer/g", POISON)
    tail.push(PLANS, b"consumer/g", plan(2, {"m1": [0, 1]}))
    tail.push(LEASE, b"leader", POISON)
    f.poll(0)
    print(f"follower stats after poison: {dict(f.stats)}")
    assert f.generation == 2 and f.assignment() == [("orders", 0), ("orders", 1)]
    assert f.stats["records_skipped_too_deep"] == 4
    assert f.stats["plans_skipped"] == 2 and f.stats["heartbeats_skipped"] == 2


# ---- B: one generation, one content ---------------------------------------------------------------------


class LatePublisher(FakePublisher):
    """Every record reaches the topic (``log``), but the next ``timeouts`` publishes are not confirmed in time:
    what a producer does when its delivery report comes after the publish timeout."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts = 0
        self.log: list[tuple[str, bytes | None]] = []

    def publish_many(self, topic: str, records: list[tuple[str, bytes | None]], timeout_s: float) -> None:
        for key, value in records:
            if topic == "_rackplan.plans":
                self.log.append((key, value))
            self.records.append((topic, key, None if value is None else json.loads(value)))
        if topic == "_rackplan.plans" and self.timeouts:
            self.timeouts -= 1
            raise UNCERTAIN(f"{len(records)} record(s) to {topic} not confirmed in time")


def contents_by_generation(log: list[tuple[str, bytes | None]]) -> dict[tuple[str, int], set[bytes]]:
    out: dict[tuple[str, int], set[bytes]] = {}
    for key, value in log:
        if value is not None:
            out.setdefault((key, json.loads(value)["generation"]), set()).add(value)
    return out


def make_late_agent(**extra: Any) -> tuple[Agent, FakeAdmin, LatePublisher]:
    admin = FakeAdmin({"t": [[1], [1], [2], [2]]})
    agent, _, _ = make_agent(admin, [group("g")], **extra)
    late = LatePublisher()
    agent.publisher = late
    return agent, admin, late


def test_a_timed_out_plan_is_resent_byte_for_byte_or_its_generation_is_skipped() -> None:
    agent, admin, late = make_late_agent()
    cycle(agent)  # generation 1, confirmed
    late.timeouts = 1
    admin.topics = {"t": [[2], [2], [1], [1]]}
    assert cycle(agent).published == [], "generation 2 timed out (and will land)"
    cycle(agent)  # the same cluster: generation 2 again, the same bytes
    late.timeouts = 1
    admin.topics = {"t": [[1], [2], [1], [2]]}
    cycle(agent)  # generation 3 times out ...
    admin.topics = {"t": [[2], [1], [2], [1]]}
    cycle(agent)  # ... and the cluster moved on before the retry: another content, so generation 4
    by_gen = contents_by_generation(late.log)
    print(
        "records per generation:",
        {
            g: (sum(1 for k, v in late.log if v and json.loads(v)["generation"] == g), len(c))
            for (_, g), c in sorted(by_gen.items())
        },
    )
    assert all(len(c) == 1 for c in by_gen.values()), "a generation written with two contents"
    assert sorted(g for _, g in by_gen) == [1, 2, 3, 4]
    assert agent.term.book.latest("consumer/g").generation == 4  # type: ignore[union-attr]
    assert agent.metrics.get("rackplan_generations_reserved_total", {"reason": "uncertain_delivery"}) == 2


def test_a_timed_out_plan_read_back_later_becomes_the_plan_of_record() -> None:
    agent, admin, late = make_late_agent()
    cycle(agent)
    late.timeouts = 1
    admin.topics = {"t": [[2], [2], [1], [1]]}
    cycle(agent)  # generation 2 times out
    assert agent.term.book.latest("consumer/g").generation == 1  # type: ignore[union-attr]
    mine = ((WRITER_HEADER, agent.agent_id.encode()), (LEASE_GROUP_HEADER, b""))
    key, value = late.log[-1]
    agent.plan_tail = PlanTail([raw(key.encode(), value, 1, topic="p", headers=mine)])  # type: ignore[assignment]
    r = cycle(agent)
    assert agent.term.book.latest("consumer/g").generation == 2, "it landed: followers hold it"  # type: ignore[union-attr]
    assert r.published == [] and all(g.in_doubt is None for g in agent.term.groups.values()), (
        "nothing to re-send, nothing in doubt"
    )
    assert contents_by_generation(late.log)[("consumer/g", 2)] == {value}


def _b_joins_behind_a_late_publisher() -> tuple[Agent, LatePublisher]:
    """Follower a holds every partition under plan 1; b joins, so the next cycle plans a handover."""
    from tests.agent.planning.test_handover import follow

    admin = FakeAdmin({"t": [[1], [1], [2], [2], [3], [3]]})
    agent, _, _ = make_agent(admin, [], registrations={"ttl_s": 120}, followers={"release_timeout_s": 60})
    late = LatePublisher()
    agent.publisher = late
    follow(agent, "a", "az-a")
    cycle(agent, 1)
    follow(agent, "a", "az-a", released=1, mode="plan")
    follow(agent, "b", "az-b")
    return agent, late


def test_a_timed_out_revoking_plan_read_back_later_still_gets_its_target() -> None:
    from tests.agent.planning.test_handover import follow

    agent, late = _b_joins_behind_a_late_publisher()
    late.timeouts = 1
    assert cycle(agent, 1).published == [], "the revoking plan timed out (and lands)"
    key, value = late.log[-1]
    assert json.loads(value or b"{}")["state"] == "revoking"
    mine = ((WRITER_HEADER, agent.agent_id.encode()), (LEASE_GROUP_HEADER, b""))
    agent.plan_tail = PlanTail([raw(key.encode(), value, 1, topic="p", headers=mine)])  # type: ignore[assignment]
    cycle(agent, 1)
    assert key in dict(agent.term.handovers()), (
        "the landed revoking plan is a handover whose target must follow"
    )
    gen = dict(agent.term.handovers())[key].generation
    follow(agent, "a", "az-a", released=gen, mode="plan")
    done = cycle(agent, 1).completed
    assert [p.state for p in done] == ["proposed"] and done[0].generation > gen
    assert all(len(c) == 1 for c in contents_by_generation(late.log).values())


def test_a_timed_out_handover_target_never_shares_its_generation() -> None:
    from tests.agent.planning.test_handover import follow

    agent, late = _b_joins_behind_a_late_publisher()
    r = cycle(agent, 1)  # a revoking plan: a gives b's partitions up
    assert [p.state for p in r.published] == ["revoking"]
    follow(agent, "a", "az-a", released=r.published[0].generation, mode="plan")
    late.timeouts = 1
    cycle(agent, 1)  # the target times out (and lands) ...
    cycle(agent, 40)  # ... the retry goes above it
    by_gen = contents_by_generation(late.log)
    assert all(len(c) == 1 for c in by_gen.values()), by_gen.keys()


# ---- C: trusted registrations ------------------------------------------------------------------------------


def test_a_forged_member_of_a_settings_group_is_refused() -> None:
    """Found: a forged member got 3 of 12 partitions of a group defined in the settings file."""
    agent, _pub, buf = make_agent(FakeAdmin({"t": [[1], [2], [3], [1], [2], [3]]}), [group("g")])
    assert [p.generation for p in cycle(agent).published] == [1]
    agent.intake.apply_raw(
        agent.term, [raw(b"consumer/g/intruder", reg_value("g", "intruder", "az-c"), now_ms(agent))]
    )
    r = cycle(agent)
    assert r.published == [] and agent.term.regs[0].source == "file"
    assert "intruder" not in agent.term.book.latest("consumer/g").body["assignment"]  # type: ignore[union-attr]
    skipped = agent.metrics.get(
        "rackplan_records_skipped_total", {"topic": "registrations", "reason": "settings_group"}
    )
    assert skipped == 1 and "allow_override_settings_groups is false" in buf.getvalue()


def test_overriding_settings_groups_is_an_explicit_choice() -> None:
    agent, _pub, _ = make_agent(
        FakeAdmin({"t": [[1], [2], [3]]}),
        [group("g")],
        registrations={"allow_override_settings_groups": True},
    )
    cycle(agent)
    agent.intake.apply_raw(
        agent.term, [raw(b"consumer/g/extra", reg_value("g", "extra", "az-c"), now_ms(agent))]
    )
    r = cycle(agent)
    assert agent.term.regs[0].source == "file+topic" and "extra" in r.published[0].body["assignment"]


@pytest.mark.parametrize("forged", ["payload", "record"])
def test_a_registration_dated_in_the_future_still_expires(forged: str) -> None:
    """Found: timestamp_ms=10**15 made an entry immune to the TTL."""
    agent, _pub, _ = make_agent(FakeAdmin({"t": [[1], [2], [3]]}), [], registrations={"ttl_s": 60})
    now = now_ms(agent)
    far = 10**15
    value = reg_value("dyn", "m", timestamp_ms=far) if forged == "payload" else reg_value("dyn", "m")
    agent.intake.apply_raw(agent.term, [raw(b"consumer/dyn/m", value, far if forged == "record" else now)])
    assert cycle(agent, 1).registered == ["consumer/dyn"]
    assert cycle(agent, 30).unregistered == []
    assert cycle(agent, 31).unregistered == ["consumer/dyn"], "expired 61 s after it arrived"


def test_the_newest_payload_timestamp_no_longer_decides_a_groups_assignor() -> None:
    """Found: the newest timestamp_ms switched a group's assignor."""
    agent, _pub, _ = make_agent(FakeAdmin({"t": [[1], [2], [3]]}), [])
    t = now_ms(agent)
    agent.intake.apply_raw(
        agent.term,
        [
            raw(
                b"consumer/dyn/forger",
                reg_value("dyn", "forger", assignor="rack-optimal", timestamp_ms=10**15),
                t - 5000,
            ),
            raw(b"consumer/dyn/m", reg_value("dyn", "m", assignor="range"), t),
        ],
    )
    cycle(agent, 1)
    assert agent.term.regs[0].spec["assignor"] == "range", (
        "the record written last wins, by its broker timestamp"
    )


def test_signed_registrations(tmp_path: Path) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text("s3cret\n")
    agent, _pub, buf = make_agent(
        FakeAdmin({"t": [[1], [2], [3]]}), [], registrations={"secret_file": str(secret_file)}
    )
    t = now_ms(agent)
    _, good = consumer_registration(
        "dyn", "m-good", rack="az-a", topics=["t"], timestamp_ms=t, secret=b"s3cret"
    )
    _, wrong = consumer_registration(
        "dyn", "m-wrong", rack="az-a", topics=["t"], timestamp_ms=t, secret=b"guess"
    )
    _, old = consumer_registration(
        "dyn", "m-old", rack="az-a", topics=["t"], timestamp_ms=t - 3_600_000, secret=b"s3cret"
    )
    tampered = json.loads(good)
    tampered["rack"] = "az-c"
    agent.intake.apply_raw(
        agent.term,
        [
            raw(b"consumer/dyn/m-good", good, t),
            raw(b"consumer/dyn/m-wrong", wrong, t),
            raw(b"consumer/dyn/m-plain", reg_value("dyn", "m-plain", timestamp_ms=t), t),
            raw(b"consumer/dyn/m-old", old, t),  # a signed record replayed an hour later (ttl_s 300)
            raw(b"consumer/dyn/m-good", json.dumps(tampered).encode(), t),
        ],
    )
    r = cycle(agent, 1)
    assert sorted(r.published[0].body["assignment"]) == ["m-good"]
    assert r.published[0].document["consumer_group"]["assignment"]  # m-good got the partitions
    skipped = agent.metrics.series("rackplan_records_skipped_total")
    assert {dict(k)["reason"]: v for k, v in skipped.items()} == {"bad_signature": 2, "unsigned": 1}
    # The replayed record was accepted as signed, but it is as old as its signed timestamp: expired at once.
    assert agent.metrics.get("rackplan_registrations_expired_total") == 1
    assert "s3cret" not in buf.getvalue()


def test_followers_sign_their_registrations_when_given_the_secret(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text("s3cret")
    h = Harness(monkeypatch, registration_secret_file=str(secret_file))
    h.follower()
    (_, key, value) = next(r for r in h.broker.records if r[0] == REGS)
    e = decode_registration(key, value, int(h.wall.now * 1000), secret=b"s3cret")
    assert e is not None and e.member["member_id"] == "m1"
    with pytest.raises(RegistrationRecordError) as err:
        decode_registration(key, value, int(h.wall.now * 1000), secret=b"other")
    assert err.value.reason == "bad_signature"


def test_an_unreadable_secret_file_is_a_settings_error_naming_the_setting(tmp_path: Path) -> None:
    from pydantic import ValidationError

    from rackplan.agent.follower import FollowerError
    from rackplan.agent.settings.errors import describe_errors
    from rackplan.agent.settings.sections import Settings

    with pytest.raises(ValidationError) as e:
        Settings.model_validate({"registrations": {"secret_file": str(tmp_path / "missing")}})
    (line,) = describe_errors(e.value, Settings)
    assert line.startswith("registrations.secret_file: cannot read"), line
    (tmp_path / "empty").write_text("  \n")
    with pytest.raises(ValidationError, match=r"is empty"):
        Settings.model_validate({"registrations": {"secret_file": str(tmp_path / "empty")}})
    with pytest.raises(FollowerError, match="registration_secret_file"):
        from rackplan.agent.follower import PlanFollower

        PlanFollower(
            {"bootstrap.servers": "x:1", "group.id": "g"},
            ["t"],
            "m",
            {"registration_secret_file": str(tmp_path / "missing")},
        )


# ---- D: heartbeats judged by record timestamps --------------------------------------------------------------


def test_a_heartbeat_dated_a_day_ahead_does_not_delay_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: one heartbeat dated a day ahead kept followers from falling back 45 s after the agent died."""
    from rackplan.agent.protocol.lease import Heartbeat

    h = Harness(monkeypatch)  # agent_timeout_s 10, fallback_grace_s 2
    f = h.follower()
    tail = FakeTail.instances[-1]
    h.heartbeat()
    tail.push(PLANS, b"consumer/g", plan(1, {"m1": [0, 1]}))
    f.poll(0)
    assert f.mode == "plan"
    day_ms = int((h.wall.now + 86_400) * 1000)
    forged = Heartbeat("agent-1", 1, day_ms, 1.0).encode()
    tail.backlog.append(RawRecord(0, 99, b"leader", forged, day_ms, LEASE))  # record timestamp forged too
    f.poll(0)
    died = h.clock.now  # the agent is dead: no heartbeat from here on
    fell_back_at = None
    while h.clock.now - died < 60:
        h.advance(0.5)
        f.poll(0)
        if f.mode == "subscription":
            fell_back_at = h.clock.now - died
            break
    print(f"fallback {fell_back_at} s after the last heartbeat (agent_timeout_s 10 + grace 2)")
    assert fell_back_at is not None and fell_back_at <= 10 + 2 + 1
    assert f.stats["heartbeats_future_dated"] == 1


def test_a_heartbeat_within_the_skew_is_taken_at_its_broker_timestamp(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rackplan.agent.protocol.lease import Heartbeat

    h = Harness(monkeypatch)
    f = h.follower()
    tail = FakeTail.instances[-1]
    # The writer's clock says an hour ago, the broker says now: the broker is believed.
    hb = Heartbeat("agent-1", 1, int((h.wall.now - 3600) * 1000), 1.0).encode()
    tail.backlog.append(RawRecord(0, 1, b"leader", hb, int(h.wall.now * 1000), LEASE))
    tail.push(PLANS, b"consumer/g", plan(1, {"m1": [0]}))
    f.poll(0)
    h.advance(5)
    f.poll(0)
    assert f.mode == "plan" and f.stats["fallbacks"] == 0


# ---- G: bounded generations and epochs, foreign plan records ------------------------------------------------


def test_forged_generations_and_epochs_beyond_2_53_are_refused() -> None:
    forged = json.loads(plan(1, {"m1": [0]}))
    forged["generation"] = 10**30
    with pytest.raises(PlanDecodeError) as e:
        decode_record(b"consumer/g", json.dumps(forged).encode())
    assert e.value.reason == "out_of_range"
    forged["generation"] = 2**53 - 1
    assert decode_record(b"consumer/g", json.dumps(forged).encode()) is not None
    hb = {"schema": 1, "agent_id": "x", "epoch": 2**62, "timestamp_ms": 1, "interval_s": 1}
    with pytest.raises(HeartbeatError) as h:
        decode_heartbeat(b"leader", json.dumps(hb).encode())
    assert h.value.reason == "out_of_range"
    with pytest.raises(HeartbeatError):
        decode_heartbeat(b"leader", json.dumps({**hb, "epoch": 1, "interval_s": 86_400 * 365}).encode())


def test_a_foreign_tombstone_and_a_forged_plan_are_discrepancies_the_agent_reports_and_outranks() -> None:
    agent, pub, buf = make_agent(FakeAdmin({"t": [[1], [2]]}), [group("g"), group("h")])
    cycle(agent)

    forged = json.loads(plan(1, {"g-a": [0, 1]}, group="h"))
    forged["generation"] = 50
    tail = PlanTail(
        [
            raw(b"consumer/g", None, 1, offset=7, topic="p"),  # a tombstone nobody of ours wrote
            raw(
                b"consumer/h",
                json.dumps(forged).encode(),
                1,
                offset=8,
                topic="p",
                headers=((WRITER_HEADER, b"rogue"),),
            ),
        ]
    )
    agent.plan_tail = tail  # type: ignore[assignment]
    r = cycle(agent)
    shown = agent.status().plans_json()
    print("discrepancies:", json.dumps({k: v["discrepancy"] for k, v in shown.items()}))
    assert shown["consumer/g"]["discrepancy"]["tombstone"] is True
    assert shown["consumer/h"]["discrepancy"] == {
        "writer": "rogue",
        "writer_lease_group": None,
        "tombstone": False,
        "generation": 50,
        "offset": 8,
        "timestamp_ms": 1,
    }
    assert agent.metrics.get("rackplan_plan_discrepancies") == 2
    assert agent.metrics.get("rackplan_foreign_writers_total", {"topic": "plans"}) == 2
    # The agent answers in the same cycle: its plan of record again, above the forged generation.
    answered = {p.key: (p.generation, p.body["assignment"]) for p in r.published}
    print("re-asserted:", {k: g for k, (g, _) in answered.items()})
    assert answered == {
        "consumer/g": (2, agent.term.book.last_live("consumer/g").body["assignment"]),  # type: ignore[union-attr]
        "consumer/h": (51, agent.term.book.latest("consumer/h").body["assignment"]),  # type: ignore[union-attr]
    }
    assert all("another writer" in p.reason for p in r.published)
    assert shown["consumer/h"]["generation"] == 51, "/v1/plans: the agent's plan next to what followers read"
    assert cycle(agent).published == [], "answered once"
    # The agent's own records, read back, end the discrepancies.
    mine = ((WRITER_HEADER, agent.agent_id.encode()), (LEASE_GROUP_HEADER, b""))
    tail.records = [
        raw(k.encode(), json.dumps(v).encode(), 1, topic="p", headers=mine)
        for k, v in pub.on("_rackplan.plans")[-2:]
    ]
    cycle(agent)
    assert agent.term.discrepancies() == {}
    assert agent.metrics.get("rackplan_plan_discrepancies") == 0
    assert "foreign writer on the plan topic" in buf.getvalue()


def test_every_test_docs_security_md_cites_exists() -> None:
    """docs/security.md says what is tested where: each cited test must exist (a ``*`` ends a prefix)."""
    import re

    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "security.md").read_text(encoding="utf-8")
    cited = re.findall(r"`((?:tests|integration)/[\w/]+\.py)::(\w+\*?)`|`::(\w+\*?)`", text)
    last_file = ""
    checked = 0
    for path, name, bare in cited:
        last_file = path or last_file
        name = name or bare
        source = (root / last_file).read_text(encoding="utf-8")
        end = "" if name.endswith("*") else r"\("
        pattern = "def " + re.escape(name.rstrip("*")) + end
        assert re.search(pattern, source), f"docs/security.md cites {last_file}::{name}, which does not exist"
        checked += 1
    assert checked >= 20
