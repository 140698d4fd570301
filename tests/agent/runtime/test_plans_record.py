"""``rackplan plans``' reading of the plan topic: the plan of record is the one followers act on, forged and
malformed records are reported with their reason, never trusted (the follower's own intake is the oracle)."""

from __future__ import annotations

import collections
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.agent.core.logging import get_logger
from rackplan.agent.follower.intake import ControlIntake
from rackplan.agent.follower.settings import Identity, PlanFollowerSettings
from rackplan.agent.kafka.tail import RawRecord
from rackplan.agent.protocol.mac import MAC_HEADER, record_mac
from rackplan.agent.protocol.plans import PlanDecodeError
from rackplan.agent.runtime.plans_record import key_json, plan_topic, resolve_key, topic_json

TOPIC = "_rackplan.plans"
SECRET = b"s3cret"
KEY = b"consumer/g"


def value(generation: int, group: str = "g", schema: int = 1) -> bytes:
    return json.dumps(
        {
            "schema": schema,
            "generation": generation,
            "state": "proposed",
            "reason": f"plan {generation}",
            "created_at": "2026-11-28T06:00:00Z",
            "locality": {
                "fetch_mode": "nearest-replica",
                "before": None,
                "after": {"cross_rack": 1, "total": 4},
            },
            "consumer_group": {
                "group_id": group,
                "assignment": {"m-1": [["orders", generation % 4]]},
                "revoked": {},
            },
            "stats": {"partitions": 4, "cross_rack": 1},
            "publisher": {"agent_id": "agent-1", "epoch": 3},
        }
    ).encode()


def record(offset: int, v: bytes | None, mac: str = "good", key: bytes = KEY) -> RawRecord:
    """A plan-topic record: ``mac`` good (the agent's), none (unsigned) or bad (a forger's guess)."""
    headers: tuple[tuple[str, bytes], ...] = ()
    if mac == "good":
        headers = ((MAC_HEADER, record_mac(SECRET, TOPIC, key, v)),)
    elif mac == "bad":
        headers = ((MAC_HEADER, record_mac(b"guess", TOPIC, key, v)),)
    return RawRecord(0, offset, key, v, 1_800_000_000_000 + offset, TOPIC, headers)


def follower_view(raw: list[RawRecord]) -> tuple[int | None, bool, int]:
    """What a plan follower of group ``g`` holding the secret acts on after ``raw``: its plan's generation,
    whether the plan was tombstoned, and how many records it refused (the oracle)."""
    who = Identity("g", "m-1", "az-a", ("orders",), "consumer/g", SECRET)
    stats: collections.Counter[str] = collections.Counter()
    intake = ControlIntake(
        who,
        PlanFollowerSettings(plan_topic=TOPIC),
        {},
        _no_tail,
        lambda: 0.0,
        lambda: 0.0,
        get_logger("t"),
        stats,
    )
    intake.records(raw)
    latest = intake.latest
    return (None if latest is None else latest.generation), intake.tombstoned, stats["plans_skipped"]


def _no_tail(*_: Any) -> Any:
    raise AssertionError("the records are given")


def test_the_newest_plan_counts_stale_forged_and_malformed_records_are_reported() -> None:
    raw = [
        record(0, value(1)),
        record(1, value(3)),
        record(2, value(2)),  # stale: below 3
        record(3, value(9), mac="none"),  # a forger without the secret
        record(4, value(9), mac="bad"),
        record(5, b"{not json"),
        record(6, value(4, schema=7)),
    ]
    found = plan_topic(raw, TOPIC, SECRET)
    h = found.keys["consumer/g"]
    assert h.plan is not None and h.plan.generation == 3 and h.at is not None and h.at.offset == 1
    assert [s.offset for s in h.stale] == [2]
    assert [(s.offset, s.reason) for s in h.refused] == [
        (3, "unsigned"),
        (4, "bad_signature"),
        (5, "not_json"),  # the agent's MAC, but not a plan
        (6, "schema"),
    ]
    doc = key_json(h)
    assert doc["status"] == "planned" and not doc["ok"]  # a plan, and records to look at
    assert (
        doc["plan"]["generation"] == 3 and doc["plan"]["epoch"] == 3 and doc["plan"]["agent_id"] == "agent-1"
    )
    assert doc["plan"]["reason"] == "plan 3" and doc["plan"]["partitions"] == 1
    assert doc["record"]["written_at"] == "2027-01-15T08:00:00.001Z"


def test_malformed_records_signed_by_the_agent_name_their_reason() -> None:
    raw = [record(0, b"{not json"), record(1, value(2, schema=7)), record(2, value(1, group="other"))]
    h = plan_topic(raw, TOPIC, SECRET).keys["consumer/g"]
    assert h.plan is None and not h.tombstoned
    assert [s.reason for s in h.refused] == ["not_json", "schema", "key_mismatch"]
    assert key_json(h)["status"] == "no_valid_plan"


def test_without_a_secret_macs_are_not_checked_and_the_list_says_so() -> None:
    raw = [record(0, value(1), mac="none"), record(1, None, mac="none", key=b"consumer/gone")]
    found = plan_topic(raw, TOPIC, None)
    assert found.keys["consumer/g"].plan is not None and found.keys["consumer/gone"].tombstoned
    doc = topic_json(found, secret=False)
    assert (
        doc["ok"]
        and not doc["authenticated"]
        and [k["key"] for k in doc["keys"]] == ["consumer/g", "consumer/gone"]
    )


def test_records_without_a_plan_key_are_reported_apart() -> None:
    raw = [record(0, value(1), key=b"nokind"), record(1, value(1), key=b"\xff\xfe")]
    found = plan_topic(raw, TOPIC, None)
    assert not found.keys and [s.reason for s in found.unkeyed] == ["bad_key", "not_utf8"]
    assert not topic_json(found, secret=False)["ok"]


def test_a_group_name_resolves_to_its_key() -> None:
    assert resolve_key("pay", ["consumer/pay"]) == "consumer/pay"
    assert resolve_key("clicks", ["streams/clicks"]) == "streams/clicks"
    assert resolve_key("streams/clicks", []) == "streams/clicks"
    for bad in ("", "kafka/x", "consumer/"):
        with pytest.raises(PlanDecodeError):
            resolve_key(bad, [])


#: one record of the plan topic for group g: (generation or None for a tombstone, its MAC, malformed?)
RECORDS = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(1, 8)),
        st.sampled_from(["good", "good", "good", "none", "bad"]),
        st.booleans(),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(RECORDS)
def test_the_plan_of_record_is_what_the_follower_itself_acts_on(
    spec: list[tuple[int | None, str, bool]],
) -> None:
    raw = []
    for offset, (gen, mac, broken) in enumerate(spec):
        v = None if gen is None else (value(gen)[:-5] if broken else value(gen))
        raw.append(record(offset, v, mac))
    h = plan_topic(raw, TOPIC, SECRET).keys.get("consumer/g")
    generation, _, refused = follower_view(raw)
    ours = None if h is None or h.plan is None else h.plan.generation
    assert ours == generation
    if h is not None and h.tombstoned:
        assert generation is None
    assert (0 if h is None else len(h.refused)) == refused
