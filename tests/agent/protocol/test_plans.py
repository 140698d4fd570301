"""Plan records: the contract's keys and values, canonical bytes, generations that resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rackplan.agent.protocol.plans import (
    Locality,
    PlanDecodeError,
    PlanKey,
    PlanRecord,
    decode_record,
    encode_value,
    fingerprint,
    plan_key,
    split_key,
    utc_now_iso,
)
from rackplan.agent.state.plan_book import PlanBook

SCHEMA = Path(__file__).resolve().parents[3] / "docs" / "plan-schema.json"


def record(key: str = "consumer/payments", generation: int = 7, **kw: Any) -> PlanRecord:
    doc = {
        "consumer_group": {"group_id": "payments", "assignment": {"m-1": [["orders", 0]]}, "revoked": {}},
        "stats": {"partitions": 1, "assigned": 1, "cross_rack": 0, "max_minus_min": 0, "moved": 0},
    }
    base: dict[str, Any] = {
        "key": key,
        "generation": generation,
        "cluster_fingerprint": fingerprint({"t": 1}),
        "registration_fingerprint": fingerprint({"g": 1}),
        "reason": "replica racks changed: orders-3, orders-7",
        "created_at": utc_now_iso(1_795_305_600.25),
        "document": doc,
        "moved": 0,
        "fetch_mode": "nearest-replica",
        "locality_before": Locality(1, 4),
        "locality_after": Locality(0, 1),
    }
    base.update(kw)
    return PlanRecord(**base)


def test_keys() -> None:
    assert plan_key("consumer", "payments") == "consumer/payments"
    assert plan_key("streams", "clicks") == "streams/clicks"
    assert split_key("consumer/a/b") == ("consumer", "a/b")
    for bad in ("payments", "other/x", "consumer/"):
        with pytest.raises(PlanDecodeError):
            split_key(bad)


def test_value_has_the_contract_fields() -> None:
    v = json.loads(encode_value(record()))
    assert v["schema"] == 1 and v["generation"] == 7 and v["state"] == "proposed"
    assert v["created_at"] == "2026-11-22T00:00:00Z"
    assert v["created_at_ms"] == 1_795_305_600_000  # the same instant in the one encoding all records share
    assert v["reason"] == "replica racks changed: orders-3, orders-7"
    assert v["consumer_group"]["assignment"] == {"m-1": [["orders", 0]]}
    assert v["consumer_group"]["revoked"] == {}
    assert set(v["stats"]) >= {"partitions", "assigned", "cross_rack", "max_minus_min", "moved"}
    assert v["locality"] == {
        "fetch_mode": "nearest-replica",
        "before": {"cross_rack": 1, "total": 4, "fraction": 0.25},
        "after": {"cross_rack": 0, "total": 1, "fraction": 0.0},
    }


def test_encoding_is_canonical_and_round_trips() -> None:
    r = record()
    assert encode_value(r) == encode_value(record())
    back = decode_record(b"consumer/payments", encode_value(r))
    assert back == r
    assert encode_value(back) == encode_value(r)


def test_streams_record() -> None:
    doc = {
        "streams_app": {"application_id": "clicks", "assignment": {}, "probing_rebalance_needed": False},
        "stats": {"tasks": 0},
    }
    r = record("streams/clicks", document=doc, locality_before=None)
    v = json.loads(encode_value(r))
    assert "consumer_group" not in v and v["streams_app"]["application_id"] == "clicks"
    assert v["locality"]["before"] is None
    assert decode_record("streams/clicks", encode_value(r)) == r


def test_tombstone_decodes_to_none() -> None:
    assert decode_record(b"consumer/payments", None) is None


@pytest.mark.parametrize(
    "value",
    [
        b"not json",
        b"[]",
        b'{"schema": 2, "generation": 1}',
        b'{"schema": 1, "generation": 0, "consumer_group": {}, "stats": {}}',
        b'{"schema": 1, "generation": true, "consumer_group": {}, "stats": {}}',
        b'{"schema": 1, "generation": 1, "streams_app": {}, "stats": {}}',
        b'{"schema": 1, "generation": 1, "consumer_group": {}}',
    ],
)
def test_malformed_values_are_rejected(value: bytes) -> None:
    with pytest.raises(PlanDecodeError):
        decode_record(b"consumer/payments", value)


def test_generations_resume_after_replay_and_survive_tombstones() -> None:
    book = PlanBook()
    assert book.next_generation("consumer/a") == 1
    book.replay(
        [
            ("consumer/a", record("consumer/a", 1)),
            ("consumer/a", record("consumer/a", 2)),
            ("consumer/b", record("consumer/b", 5)),
            ("consumer/b", None),
        ]
    )
    assert book.next_generation("consumer/a") == 3
    assert book.latest("consumer/a") == record("consumer/a", 2)
    assert book.latest("consumer/b") is None
    assert book.next_generation("consumer/b") == 6  # re-registered later: no regression
    assert book.live_keys() == ["consumer/a"]


def test_fingerprint_is_order_independent_and_stable() -> None:
    assert fingerprint({"a": 1, "b": [1, 2]}) == fingerprint({"b": [1, 2], "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})
    assert len(fingerprint({})) == 64


def test_schema_lists_every_field_the_agent_writes() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    v = json.loads(encode_value(record()))
    assert set(schema["required"]) <= set(v)
    assert set(v) <= set(schema["properties"])


def test_value_validates_against_the_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not a dev dependency yet")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validate(json.loads(encode_value(record())), schema)


def test_a_stale_record_is_not_the_plan_of_record() -> None:
    """A record whose generation is not above every earlier one (a deposed leader, a rogue write)."""
    book = PlanBook()
    stale = book.replay(
        [
            ("consumer/a", record("consumer/a", 3)),
            ("consumer/a", record("consumer/a", 2)),
            ("consumer/a", record("consumer/a", 3, reason="duplicate")),
            ("consumer/a", None),
            ("consumer/a", record("consumer/a", 4)),
        ]
    )
    assert stale == [("consumer/a", 2), ("consumer/a", 3)]
    assert book.latest("consumer/a") == record("consumer/a", 4)
    assert not book.apply("consumer/a", record("consumer/a", 4))


@pytest.mark.parametrize(
    ("body", "text"),
    [
        ({"group_id": "payments", "assignment": {"m": [["orders"]]}}, "is not \\[topic, partition\\]"),
        ({"group_id": "payments", "assignment": {"m": [["orders", -1]]}}, "is not \\[topic, partition\\]"),
        ({"group_id": "payments", "assignment": {"m": "orders-0"}}, "must be an array"),
        ({"group_id": "payments"}, "assignment must be an object"),
        ({"group_id": "payments", "assignment": {}, "revoked": []}, "revoked must be an object"),
        ({"group_id": "other", "assignment": {}}, "does not match the key"),
    ],
)
def test_followers_never_see_a_malformed_assignment(body: dict[str, Any], text: str) -> None:
    value = {"schema": 1, "generation": 2, "consumer_group": body, "stats": {}}
    with pytest.raises(PlanDecodeError, match=text):
        decode_record("consumer/payments", json.dumps(value).encode())


def test_handover_records_validate_against_the_schema() -> None:
    from rackplan.agent.planning.handover import Split, revoking_record

    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not a dev dependency yet")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    target = record(publisher={"agent_id": "agent-1", "epoch": 3})
    rev = revoking_record(target, Split({"m-1": []}, {"m-0": [("orders", 0)]}, ("m-0",)), 30.0)
    value = json.loads(encode_value(rev))
    jsonschema.validate(value, schema)
    assert value["state"] == "revoking" and value["handover"]["awaiting"] == ["m-0"]
    assert value["handover"]["target"]["consumer_group"] == target.body
    back = decode_record(rev.key, encode_value(rev))
    assert back == rev
    final = record(
        generation=8,
        handover={"from_generation": 7, "timed_out": []},
        publisher={"agent_id": "a", "epoch": 1},
    )
    jsonschema.validate(json.loads(encode_value(final)), schema)


# ---- PlanKey: "kind/name" taken apart and put together in one place ---------------------------------------


@given(st.sampled_from(["consumer", "streams"]), st.text(min_size=1))
def test_a_key_made_parses_back_to_its_parts(kind: str, name: str) -> None:
    key = plan_key(kind, name)
    assert PlanKey.parse(key) == PlanKey(kind, name) == PlanKey.split(key)
    assert split_key(key) == (kind, name) and str(PlanKey(kind, name)) == key


@given(st.text())
def test_split_is_partition_at_the_first_slash_and_parse_accepts_only_known_kinds(key: str) -> None:
    # The statement of the rule the five hand splits used (``key.partition("/")``), checked on any text.
    kind, sep, name = key.partition("/")
    assert PlanKey.split(key) == PlanKey(kind, name)
    if sep:
        assert str(PlanKey.split(key)) == key
    if sep and kind in ("consumer", "streams") and name:
        assert PlanKey.parse(key) == PlanKey(kind, name)
    else:
        with pytest.raises(PlanDecodeError) as e:
            PlanKey.parse(key)
        assert e.value.reason == "bad_key"


def test_no_agent_module_takes_a_plan_key_apart_by_hand() -> None:
    # One owner: ``x.partition("/")`` / ``x.split("/")`` on a key belongs to PlanKey (registration keys,
    # three parts, to protocol/registrations.py; URL paths to runtime/http.py).
    import ast

    import rackplan.agent

    root = Path(rackplan.agent.__file__).resolve().parent
    owners = {"protocol/plans.py", "protocol/registrations.py", "runtime/http.py"}
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in owners:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("partition", "split", "rpartition")
                and any(isinstance(a, ast.Constant) and a.value == "/" for a in node.args)
            ):
                found.append((rel, node.lineno))
    assert found == []
