"""Issue 24, items 7-9, with fake clients: plans and heartbeats authenticated by content (a MAC with the
registrations secret), not by copyable headers; counters never produced above 2**53-1."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import pytest

import rackplan.agent.kafka.read_back as read_back_mod
import rackplan.agent.kafka.tail as tail_mod
import rackplan.agent.runtime.startup as startup
from rackplan.agent.core.errors import CannotRun
from rackplan.agent.kafka.publisher import LEASE_GROUP_HEADER, WRITER_HEADER, Publisher
from rackplan.agent.kafka.tail import RawRecord
from rackplan.agent.protocol.lease import Heartbeat
from rackplan.agent.protocol.mac import MAC_HEADER, mac_input, record_mac
from rackplan.agent.protocol.plans import decode_record
from rackplan.agent.protocol.records import MAX_SAFE_INT
from rackplan.agent.runtime.loop import Agent
from rackplan.agent.runtime.watch import watch_lease
from rackplan.agent.testing import FakeAdmin
from tests.agent.cycle.test_run import PlanTail, cycle, group, make_agent
from tests.agent.follower.test_follower import LEASE, PLANS, TOPIC, FakeTail, Harness, plan
from tests.agent.test_hostile_records import raw

SECRET = b"s3cret"


def secret_file(tmp_path: Path) -> str:
    p = tmp_path / "secret"
    p.write_bytes(SECRET + b"\n")
    return str(p)


def signed(
    topic: str, key: bytes, value: bytes | None, *extra: tuple[str, bytes]
) -> tuple[tuple[str, bytes], ...]:
    return (*extra, (MAC_HEADER, record_mac(SECRET, topic, key, value)))


def forged_plan(generation: int, assignment: dict[str, list[int]], group: str = "g") -> bytes:
    v = json.loads(plan(1, assignment, group=group))
    v["generation"] = generation
    return json.dumps(v).encode()


# ---- the MAC itself ----------------------------------------------------------------------------------------


def test_the_mac_covers_topic_key_and_value_and_has_a_known_answer_the_java_client_shares() -> None:
    mac = record_mac(b"k", "_rackplan.plans", b"consumer/g", b"{}")
    # The same constant is in clients/java/src/test/java/dev/rackplan/kafka/RecordMacTest.java.
    assert mac == b"hmac-sha256:" + KNOWN_PLAN.encode()
    assert (
        record_mac(b"k", "_rackplan.plans", b"consumer/g", None) == b"hmac-sha256:" + KNOWN_TOMBSTONE.encode()
    )
    others = {
        record_mac(b"k", "_rackplan.lease", b"consumer/g", b"{}"),
        record_mac(b"k", "_rackplan.plans", b"consumer/h", b"{}"),
        record_mac(b"k", "_rackplan.plans", b"consumer/g", b"{ }"),
        record_mac(b"k", "_rackplan.plans", b"consumer/g", b""),
        record_mac(b"other", "_rackplan.plans", b"consumer/g", b"{}"),
    }
    assert mac not in others and len(others) == 5
    # the documented input, spelled out: domain, topic, key, value, each with a 4-byte big-endian length
    spelled = (
        b"\0\0\0\x0frackplan-mac-v1"
        + b"\0\0\0\x0f_rackplan.plans"
        + b"\0\0\0\x0aconsumer/g"
        + b"\0\0\0\x02{}"
    )
    assert mac == b"hmac-sha256:" + hmac.new(b"k", spelled, hashlib.sha256).hexdigest().encode()
    assert mac_input("_rackplan.plans", b"consumer/g", None).endswith(b"consumer/g\xff\xff\xff\xff")
    # length-prefixed: moving bytes between fields changes the input
    assert mac_input("ab", b"c", b"") != mac_input("a", b"bc", b"")


KNOWN_PLAN = "348c75f57dd087181261002e08ae8c19a075d55ee688e7fb70562ebec6117374"
KNOWN_TOMBSTONE = "4b6e5b8fedcf7e4b6f5908f45447a0fc9e3b6689d6b164aab3aa3bff97e4254c"


def test_the_agents_producer_signs_every_record_when_a_secret_is_set() -> None:
    pub = Publisher(
        {"bootstrap.servers": "127.0.0.1:1"}, 1_000_000, headers=[(WRITER_HEADER, b"a")], secret=SECRET
    )
    headers = dict(pub._record_headers(PLANS, "consumer/g", b"{}") or [])
    assert headers[MAC_HEADER] == record_mac(SECRET, PLANS, b"consumer/g", b"{}")
    assert dict(pub._record_headers(PLANS, "consumer/g", None) or [])[MAC_HEADER] == record_mac(
        SECRET, PLANS, b"consumer/g", None
    )
    plain = Publisher({"bootstrap.servers": "127.0.0.1:1"}, 1_000_000, headers=[(WRITER_HEADER, b"a")])
    assert MAC_HEADER not in dict(plain._record_headers(PLANS, "consumer/g", b"{}") or [])


# ---- item 8: the agent detects a record it did not write by content ------------------------------------------


def secured_agent(tmp_path: Path, *groups: dict[str, Any], **extra: Any) -> tuple[Agent, Any, Any]:
    return make_agent(
        FakeAdmin({"t": [[1], [2]]}),
        list(groups),
        registrations={"secret_file": secret_file(tmp_path)},
        **extra,
    )


def test_a_forged_plan_with_copied_headers_is_refused_and_reported_by_the_agent(tmp_path: Path) -> None:
    """Found: a forged plan carrying the agent's public headers moved a follower group for 83 s, undetected."""
    agent, _pub, buf = secured_agent(tmp_path, group("g"))
    cycle(agent)
    before = agent.term.book.latest("consumer/g")
    assert before is not None
    copied = ((WRITER_HEADER, agent.agent_id.encode()), (LEASE_GROUP_HEADER, b""))
    forged = forged_plan(50, {"g-a": [0, 1]})
    agent.plan_tail = PlanTail(  # type: ignore[assignment]
        [
            raw(b"consumer/g", forged, 1, offset=8, topic=PLANS, headers=copied),
            raw(
                b"consumer/g",
                None,
                1,
                offset=9,
                topic=PLANS,
                headers=(*copied, (MAC_HEADER, b"hmac-sha256:00")),
            ),
        ]
    )
    r = cycle(agent)
    m = agent.metrics
    assert m.get("rackplan_foreign_writers_total", {"topic": "plans"}) == 2
    assert m.get("rackplan_records_skipped_total", {"topic": "plans", "reason": "unsigned"}) == 1
    assert m.get("rackplan_records_skipped_total", {"topic": "plans", "reason": "bad_signature"}) == 1
    assert "a record without the agent's MAC, refused" in buf.getvalue()
    # Refused: never the plan of record, its generation not reserved, and followers refuse it too.
    assert agent.term.book.latest("consumer/g") == before
    assert agent.term.book.next_generation("consumer/g") == before.generation + 1
    assert agent.term.discrepancies() == {}
    assert r.published == []


def test_without_a_secret_a_copy_of_the_agents_headers_above_its_generations_is_a_foreign_writer() -> None:
    """Found: a forged plan with the agent's own writer header and a higher generation went unnoticed, and made
    the agent's later plans stale to every follower.  Without a secret the agent still knows what it wrote."""
    agent, _pub, buf = make_agent(FakeAdmin({"t": [[1], [2]]}), [group("g")])
    cycle(agent)
    ours = agent.term.book.latest("consumer/g")
    assert ours is not None
    copied = ((WRITER_HEADER, agent.agent_id.encode()), (LEASE_GROUP_HEADER, b""))
    agent.plan_tail = PlanTail(  # type: ignore[assignment]
        [raw(b"consumer/g", forged_plan(50, {"g-a": [0, 1]}), 1, offset=8, topic=PLANS, headers=copied)]
    )
    r = cycle(agent)
    assert agent.metrics.get("rackplan_foreign_writers_total", {"topic": "plans"}) == 1
    assert agent.term.discrepancies()["consumer/g"]["generation"] == 50
    assert [(p.key, p.generation) for p in r.published] == [("consumer/g", 51)], "re-asserted above it"
    assert "foreign writer on the plan topic" in buf.getvalue()


def test_the_agents_own_signed_records_read_back_are_its_own(tmp_path: Path) -> None:
    agent, pub, buf = secured_agent(tmp_path, group("g"))
    cycle(agent)
    ((key, value),) = pub.on(PLANS)
    body = json.dumps(value).encode()
    mine = signed(
        PLANS, key.encode(), body, (WRITER_HEADER, agent.agent_id.encode()), (LEASE_GROUP_HEADER, b"")
    )
    agent.plan_tail = PlanTail([raw(key.encode(), body, 1, topic=PLANS, headers=mine)])  # type: ignore[assignment]
    cycle(agent)
    assert agent.metrics.get("rackplan_foreign_writers_total", {"topic": "plans"}) == 0
    assert "foreign writer" not in buf.getvalue()


def test_a_restarted_agent_replays_only_authenticated_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: after a restart the agent adopted the forger's plan as its plan of record."""
    ours = forged_plan(3, {"m1": [0]})
    theirs = forged_plan(MAX_SAFE_INT, {"m1": [0, 1]})
    records = [
        RawRecord(0, 0, b"consumer/g", ours, 1, PLANS, signed(PLANS, b"consumer/g", ours)),
        RawRecord(0, 1, b"consumer/g", theirs, 1, PLANS, ((WRITER_HEADER, b"agent"),)),
    ]

    class Tail:
        def __init__(self, *_a: Any) -> None:
            pass

        def read_available(self, _t: float) -> tuple[list[RawRecord], bool]:
            return records, True

        def close(self) -> None:
            pass

    monkeypatch.setattr(tail_mod, "TopicTail", Tail)
    skipped: list[str] = []
    from rackplan.agent.core.logging import get_logger

    got = read_back_mod.read_back({}, PLANS, 1.0, get_logger("t"), skipped.append, SECRET)
    assert [(k, r.generation if r else None) for k, r in got] == [("consumer/g", 3)]
    assert skipped == ["unsigned"]
    assert len(read_back_mod.read_back({}, PLANS, 1.0, get_logger("t"))) == 2, (
        "no secret: unauthenticated, as before"
    )


# ---- item 8: followers refuse what the agent did not write ---------------------------------------------------


def test_a_follower_with_the_secret_refuses_forged_plans_tombstones_and_heartbeats(tmp_path: Path) -> None:
    h = Harness(registration_secret_file=secret_file(tmp_path))
    f = h.follower()
    tail = FakeTail.instances[-1]
    hb = Heartbeat("agent-1", 1, int(h.wall.now * 1000), 1.0).encode()
    tail.push(LEASE, b"leader", hb, signed(LEASE, b"leader", hb))
    good = plan(1, {"m1": [0, 1]})
    tail.push(PLANS, b"consumer/g", good, signed(PLANS, b"consumer/g", good))
    f.poll(0)
    assert f.mode == "plan" and f.assignment() == [("orders", 0), ("orders", 1)]
    copied = ((WRITER_HEADER, b"agent-1"), (LEASE_GROUP_HEADER, b""))
    tail.push(PLANS, b"consumer/g", forged_plan(50, {"m1": [], "m2": [0, 1]}), copied)
    tail.push(PLANS, b"consumer/g", None, copied)  # a forged tombstone: followers would release everything
    moved = plan(2, {"m1": [0, 1]}, group="g")
    tail.push(PLANS, b"consumer/g", moved, signed(PLANS, b"consumer/h", moved))  # another key's MAC
    f.poll(0)
    assert f.assignment() == [("orders", 0), ("orders", 1)] and f.generation == 1
    assert f.stats["records_unauthenticated"] == 3
    assert f.stats["records_skipped_unsigned"] == 2 and f.stats["records_skipped_bad_signature"] == 1
    # The agent's next plan is above what the forger wrote, to followers: the forged 50 was never seen.
    nxt = plan(2, {"m1": [1]})
    tail.push(PLANS, b"consumer/g", nxt, signed(PLANS, b"consumer/g", nxt))
    f.poll(0)
    assert f.generation == 2 and f.assignment() == [("orders", 1)]
    # A forged heartbeat keeps nobody from falling back.
    h.advance(8)
    fhb = Heartbeat("agent-1", 1, int(h.wall.now * 1000), 1.0).encode()
    tail.push(LEASE, b"leader", fhb)
    f.poll(0)
    assert f.stats["records_unauthenticated"] == 4
    h.advance(3)
    f.poll(0)
    h.advance(3)
    f.poll(0)
    assert f.mode == "subscription", "the agent's last signed heartbeat is 14 s old (agent_timeout_s 10)"


def test_a_follower_without_the_secret_follows_unauthenticated_plans_as_documented() -> None:
    h = Harness()
    f = h.follower()
    FakeTail.instances[-1].push(PLANS, b"consumer/g", plan(1, {"m1": [0]}))
    f.poll(0)
    assert f.assignment() == [("orders", 0)] and f.stats["records_unauthenticated"] == 0


# ---- item 7: generations never above 2**53-1 ----------------------------------------------------------------


def test_an_exhausted_generation_is_an_alert_not_a_plan_of_2_53() -> None:
    """Found: over a forged generation 2**53-1 the agent published 2**53, which every reader refuses."""
    agent, pub, buf = make_agent(FakeAdmin({"t": [[1], [2]]}), [group("g"), group("h")])
    top = decode_record(b"consumer/g", forged_plan(MAX_SAFE_INT, {"g-a": [0, 1]}))
    agent.term.book.apply("consumer/g", top)
    r = cycle(agent)
    gens = [v["generation"] for k, v in pub.on(PLANS) if k == "consumer/g"]
    assert gens == [], f"published generations {gens} of the exhausted key"
    assert all(v["generation"] <= MAX_SAFE_INT for _k, v in pub.on(PLANS))
    assert [p.key for p in r.published] == ["consumer/h"], "the other keys are planned as usual"
    assert "generation exhausted" in r.skipped["consumer/g"]
    assert agent.metrics.get("rackplan_counters_exhausted", {"counter": "generation"}) == 1
    assert "plan generation exhausted" in buf.getvalue()
    cycle(agent)
    assert buf.getvalue().count("plan generation exhausted") == 1, "logged once, not every cycle"


def test_a_plan_generation_above_int32_is_planned_on() -> None:
    """Found with the test above: a plan of record above 2**31-1 made every later plan of its group fail (the
    planner passed it as the members' Kafka generation, an int32 in the contract)."""
    agent, pub, _buf = make_agent(FakeAdmin({"t": [[1], [2]]}), [group("g")])
    agent.term.book.apply("consumer/g", decode_record(b"consumer/g", forged_plan(2**40, {"g-a": [0, 1]})))
    r = cycle(agent)
    assert r.skipped == {}
    assert [v["generation"] for _k, v in pub.on(PLANS)] == [2**40 + 1]


# ---- item 9: lease epochs never above 2**53-1, never pinned --------------------------------------------------


def _lease_topic(monkeypatch: pytest.MonkeyPatch, records: list[RawRecord]) -> None:
    class Tail:
        def __init__(self, *_a: Any) -> None:
            pass

        def read_available(self, _t: float) -> tuple[list[RawRecord], bool]:
            return list(records), True

        def close(self) -> None:
            pass

    monkeypatch.setattr(tail_mod, "TopicTail", Tail)
    monkeypatch.setattr(startup, "TopicTail", Tail)


def test_a_heartbeat_at_epoch_2_53_minus_1_stops_the_agent_instead_of_pinning_epochs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found: one forged heartbeat at epoch 2**53-1 pinned lease epochs (every later leader reused it)."""
    agent, _pub, _buf = make_agent(FakeAdmin({"t": [[1]]}), [group("g")])
    forged = Heartbeat("agent-x", MAX_SAFE_INT, 1, 1.0, released=True).encode()
    _lease_topic(monkeypatch, [RawRecord(0, 0, b"leader", forged, 1, LEASE)])
    with pytest.raises(CannotRun, match="lease epoch exhausted"):
        startup.continue_epoch(agent.w, {})
    assert agent.metrics.get("rackplan_counters_exhausted", {"counter": "lease_epoch"}) == 1
    # Below the bound: one more, as before.
    below = Heartbeat("agent-x", 41, 1, 1.0, released=True).encode()
    _lease_topic(monkeypatch, [RawRecord(0, 0, b"leader", below, 1, LEASE)])
    assert startup.continue_epoch(agent.w, {})[0] == 42


def test_with_the_secret_a_forged_heartbeat_is_never_continued_nor_stops_the_agent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    agent, _pub, buf = secured_agent(tmp_path, group("g"))
    ours = Heartbeat("agent-y", 7, 1, 1.0, released=True).encode()
    forged = Heartbeat("agent-x", MAX_SAFE_INT, 1, 1.0, released=True).encode()
    _lease_topic(
        monkeypatch,
        [
            RawRecord(0, 0, b"leader", ours, 1, LEASE, signed(LEASE, b"leader", ours)),
            RawRecord(0, 1, b"leader", forged, 1, LEASE, ((WRITER_HEADER, b"agent-y"),)),
        ],
    )
    assert startup.continue_epoch(agent.w, {})[0] == 8
    assert agent.metrics.get("rackplan_records_skipped_total", {"topic": "lease", "reason": "unsigned"}) == 1
    # A running agent: a live forged heartbeat of an agent outside its lease group stopped it (CannotRun);
    # with the secret it is refused and reported, and the agent goes on.
    now = int(agent.tick[0] * 1000)  # type: ignore[attr-defined]
    live = Heartbeat("agent-x", 3, now, 1.0, lease_group="other").encode()
    watch_lease(agent.w, PlanTail([RawRecord(0, 2, b"leader", live, now, LEASE)]), False)  # type: ignore[arg-type]
    assert agent.metrics.get("rackplan_foreign_writers_total", {"topic": "lease"}) == 1
    assert "a heartbeat without the agent's MAC, refused" in buf.getvalue()


# ---- item 8: a follower never takes a partition its previous holder has not released ------------------------


def completed(generation: int, assignment: dict[str, list[int]], handover: dict[str, Any]) -> bytes:
    v = json.loads(plan(generation, assignment))
    v["handover"] = handover
    return json.dumps(v).encode()


def test_a_follower_never_takes_a_partition_its_silent_holder_has_not_released() -> None:
    """Found: after followers.release_timeout_s the target gave a partition to a new owner while its old owner,
    silent but alive, could still read it: only timing kept the two apart.  Now the taker checks the holder's
    registration before it takes what the target lists as unreleased."""
    h = Harness(registration_ttl_s=30)
    m1 = h.follower("m1")
    t1 = FakeTail.instances[-1]
    m2 = h.follower("m2")
    t2 = FakeTail.instances[-1]
    tails = (t1, t2)

    def push(topic: str, key: bytes, value: bytes | None) -> None:
        for t in tails:
            t.push(topic, key, value)

    def registrations() -> None:
        h.registrations(tails)

    def owners() -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for name, f in (("m1", m1), ("m2", m2)):
            for _t, p in f.assignment():
                out.setdefault(p, []).append(name)
        return out

    h.heartbeat(t1)
    h.heartbeat(t2)
    push(PLANS, b"consumer/g", plan(1, {"m1": [0, 1], "m2": [2, 3]}))
    m1.poll(0)
    m2.poll(0)
    registrations()
    m2.poll(0)
    assert owners() == {0: ["m1"], 1: ["m1"], 2: ["m2"], 3: ["m2"]}
    # The agent moves partition 1 to m2: revoking plan 2; m1 is silent (its poll loop is stuck), so after the
    # release timeout the target 3 comes with m1 timed out and partition 1 unreleased.
    push(PLANS, b"consumer/g", plan(2, {"m1": [0], "m2": [2, 3]}, state="revoking"))
    push(
        PLANS,
        b"consumer/g",
        completed(
            3,
            {"m1": [0], "m2": [1, 2, 3]},
            {"from_generation": 2, "timed_out": ["m1"], "unreleased": {"m1": [[TOPIC, 1]]}},
        ),
    )
    for _ in range(5):
        h.advance(1)
        m2.poll(0)
        assert owners()[1] == ["m1"], "m2 took partition 1 while m1 may still read it"
    assert m2.generation == 3 and m2.mode == "plan" and m2.stats["takes_withheld"] == 1
    # m1 wakes up, applies the newest plan (gives partition 1 up, committed), and says so in its registration.
    m1.poll(0)
    assert 1 not in owners(), "given up, taken by nobody yet"
    registrations()
    h.advance(1)
    m2.poll(0)
    assert owners() == {0: ["m1"], 1: ["m2"], 2: ["m2"], 3: ["m2"]}
    unassigned = h.broker.events.index(("unassign", [1]))
    assigned = max(i for i, e in enumerate(h.broker.events) if e[0] == "assign" and 1 in e[1])
    assert unassigned < assigned, "released first, taken second"


def test_a_holder_that_left_or_expired_or_follows_the_group_counts_as_released() -> None:
    from rackplan.agent.follower.releases import Seen, released, withheld
    from rackplan.agent.protocol.registrations import FollowerStatus

    now, ttl = 100_000, 30_000
    alive = Seen(FollowerStatus(released_generation=1, mode="plan"), now - 1_000)
    assert not released(alive, 2, now, ttl)
    assert released(None, 2, now, ttl), "tombstoned or never registered: holds nothing"
    assert released(Seen(alive.status, now - ttl - 1), 2, now, ttl), (
        "expired: it fenced itself at 2/3 of the TTL"
    )
    assert released(Seen(FollowerStatus(2, "waiting"), now), 2, now, ttl)
    assert released(Seen(FollowerStatus(1, "subscription"), now), 2, now, ttl), "Kafka fences the taker"
    assert released(Seen(None, now), 2, now, ttl), "no longer a follower: it reads through the group"
    hand = {"from_generation": 2, "timed_out": ["a", "b"], "unreleased": {"a": [["t", 1]], "b": [["t", 2]]}}
    members = {"a": alive, "b": Seen(FollowerStatus(2, "plan"), now)}
    assert withheld(hand, "c", members, now, ttl) == {"a": [("t", 1)]}
    assert withheld(hand, "c", None, now, ttl) == {}, (
        "registrations not readable: the agent's timeout decides"
    )
    assert withheld({"from_generation": 2, "timed_out": []}, "c", members, now, ttl) == {}
    # Registrations not read to their end yet: a member without one may just be unread, so it holds on.
    assert withheld(hand, "c", {}, now, ttl, absent_is_gone=False) == {"a": [("t", 1)], "b": [("t", 2)]}
    assert withheld(hand, "c", {}, now, ttl, absent_is_gone=True) == {}
