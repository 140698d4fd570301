"""A holder the agent expired, back before the plan without it reaches it, keeps that plan's takers waiting.

Found by the chaos scenario on real Kafka (CI, 1 run in 4): through a broker
restart a follower's registration refreshes went unconfirmed, it fenced itself
(2/3 of the TTL) and the agent expired it (the TTL) and planned without it.
Its refresh landed, two agent intervals passed, it read the plan topic to its
end, found nothing newer, and re-took its cached plan; 1.5 s later the agent's
plan without it arrived and the new owners started while it still read: 18-54
ms of two readers.  The agent now lists such a holder's partitions under
``handover.unreleased`` (``agent/planning/handover.py``), and the taker waits
for the holder's registration, which says it applied the plan.
"""

from __future__ import annotations

import json

from rackplan.agent.kafka.tail import RawRecord
from tests.agent.follower.test_follower import PLANS, TOPIC, FakeTail, Harness, plan
from tests.agent.test_forged_records import completed


def test_a_holder_back_from_expiry_is_waited_for_by_the_plan_without_it() -> None:
    h = Harness(registration_ttl_s=30)
    m1 = h.follower("m1")
    t1 = FakeTail.instances[-1]
    tails = [t1]

    h.heartbeat(t1)
    t1.push(PLANS, b"consumer/g", plan(1, {"m1": [0, 1]}))
    m1.poll(0)
    assert m1.assignment() == [(TOPIC, 0), (TOPIC, 1)]
    h.broker.deliver = False  # a broker restart: m1's refreshes go unconfirmed
    for _ in range(21):
        h.advance(1.0)
        h.heartbeat(t1)
        m1.poll(0)
    assert m1.assignment() == [] and m1.stats["self_fenced"] == 1
    h.broker.deliver = True  # confirmed again; the agent has expired m1 and is planning without it
    h.advance(10.0)
    for _ in range(2):
        h.heartbeat(t1)
        m1.poll(0)
        m1.poll(0)
        h.advance(2.5)
    assert m1.assignment() == [(TOPIC, 0), (TOPIC, 1)], "no newer plan after two agent intervals: re-taken"

    m2 = h.follower("m2")
    t2 = FakeTail.instances[-1]
    tails.append(t2)
    h.heartbeat(t2)
    without_m1 = completed(
        2,
        {"m2": [0, 1]},
        {"from_generation": 2, "timed_out": [], "unreleased": {"m1": [[TOPIC, 0], [TOPIC, 1]]}},
    )
    t2.push(PLANS, b"consumer/g", without_m1)
    h.registrations(tails)  # m1's newest registration: released_generation 1
    for _ in range(3):
        h.advance(0.5)
        m2.poll(0)
        assert m2.assignment() == [], "m2 took what m1 may still read"
    assert m2.stats["takes_withheld"] == 1
    t1.push(PLANS, b"consumer/g", without_m1)
    m1.poll(0)  # m1 reads the plan without it: gives both up, committed, and says so
    assert m1.assignment() == [] and m1.generation == 2
    h.registrations(tails)
    h.advance(1.0)
    m2.poll(0)
    assert m2.assignment() == [(TOPIC, 0), (TOPIC, 1)]
    unassigned = h.broker.events.index(("unassign", [0, 1]))
    assigned = max(i for i, e in enumerate(h.broker.events) if e[0] == "assign" and 0 in e[1])
    assert unassigned < assigned, "released first, taken second"


def test_a_taker_reads_the_registrations_to_their_end_before_it_counts_a_silent_holder_gone() -> None:
    """The taker's cheap read lags: it has only m1's registration from before the outage, older than the
    TTL, while m1's refresh (it is back, and re-took its partitions) sits unread.  Counting m1 gone on that
    would give two readers; the taker reads the registrations to their end first, and then waits."""
    h = Harness(registration_ttl_s=30)
    m2 = h.follower("m2")
    t2 = FakeTail.instances[-1]
    h.heartbeat(t2)
    m2.poll(0)
    h.broker.records.clear()

    def m1_registration(released: int, age_s: float) -> RawRecord:
        value = {
            "schema": 1,
            "group_id": "g",
            "member_id": "m1",
            "rack": "az-a",
            "topics": [TOPIC],
            "follower": True,
            "released_generation": released,
            "mode": "plan",
        }
        key = b"consumer/g/m1"
        t2.offset += 1
        at_ms = int((h.wall.now - age_s) * 1000)
        return RawRecord(0, t2.offset, key, json.dumps(value).encode(), at_ms, "_rackplan.registrations")

    t2.backlog.append(m1_registration(1, age_s=40))  # read: from before the outage, older than the TTL
    unread = [m1_registration(1, age_s=0.5)]  # m1's refresh: only a read to the end finds it
    reads_to_end = []

    def read_available(timeout_s: float) -> tuple[list[RawRecord], bool]:
        reads_to_end.append(timeout_s)
        out = [*t2.backlog, *unread]
        t2.backlog.clear()
        unread.clear()
        return out, True

    t2.read_available = read_available  # type: ignore[method-assign]
    t2.push(
        PLANS,
        b"consumer/g",
        completed(
            2, {"m2": [0, 1]}, {"from_generation": 2, "timed_out": [], "unreleased": {"m1": [[TOPIC, 0]]}}
        ),
    )
    m2.poll(0)
    assert reads_to_end == [10.0], "one read to the end, bounded by a third of the TTL"
    assert m2.assignment() == [(TOPIC, 1)], "partition 0 withheld: m1's refresh says it may still read it"
    assert m2.stats["takes_withheld"] == 1
    for _ in range(31):  # m1 never refreshes again: gone for silence, and a read to the end agrees
        h.advance(1.0)
        h.heartbeat(t2)
        m2.poll(0)
    assert m2.assignment() == [(TOPIC, 0), (TOPIC, 1)]
    assert len(reads_to_end) == 2
