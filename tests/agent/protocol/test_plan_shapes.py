"""Plan records of any shape: the decoder refuses what docs/plan-schema.json refuses (naming the field), and
nothing downstream (``rackplan plans``, ``explain``, the planner's replay, the agent's cycle) can crash on a
record the decoder took.  The hypothesis property mutates valid records (a field deleted, replaced by any
JSON value, NaN and Infinity included, or by a sibling's shape) and sends each through every reader."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rackplan.agent.kafka.read_back as read_back_mod
from rackplan.agent.cluster.metadata import NO_LEADER, Snapshot, TopicState
from rackplan.agent.core.logging import get_logger
from rackplan.agent.kafka.tail import RawRecord
from rackplan.agent.planning.fixable import best_locality
from rackplan.agent.planning.handover import holders, pending_from
from rackplan.agent.planning.planner import (
    current_locality_by_rack,
    instance_document,
    make_registration,
    plan_for,
)
from rackplan.agent.protocol.plans import PlanDecodeError, PlanRecord, decode_record
from rackplan.agent.runtime.loop import Agent
from rackplan.agent.runtime.plans_explain import explain, explain_streams
from rackplan.agent.runtime.plans_record import KeyHistory, Seen, key_json
from rackplan.agent.runtime.plans_text import render_explain, render_show
from rackplan.agent.settings.sections import Settings
from rackplan.agent.testing import FakeAdmin, FakePublisher
from rackplan.assignor import subtopologies_of

SCHEMA = json.loads((Path(__file__).resolve().parents[3] / "docs" / "plan-schema.json").read_text("utf-8"))
PLAN = jsonschema.Draft202012Validator(SCHEMA)
FP = "0" * 64
RACKS: dict[int, str | None] = {1: "az-a", 2: "az-b", 3: "az-c"}
#: orders-p and clicks-p on broker p % 3 + 1
TOPICS = {t: [[p % 3 + 1] for p in range(n)] for t, n in (("orders", 6), ("clicks", 4), ("clicks-log", 4))}
PAY: dict[str, Any] = {
    "group_id": "pay",
    "assignor": "range",
    "members": [
        {"member_id": "pay-a", "rack": "az-a", "topics": ["orders"]},
        {"member_id": "pay-b", "rack": "az-b", "topics": ["orders"]},
    ],
}
CLICKS: dict[str, Any] = {
    "application_id": "clicks",
    "num_standby_replicas": 1,
    "subtopologies": [
        {"id": "0", "source_topics": ["clicks"], "changelog_topics": ["clicks-log"], "stateful": True}
    ],
    "clients": [{"process_id": "p-a", "rack": "az-a"}, {"process_id": "p-b", "rack": "az-b"}],
}


def envelope(**body: Any) -> dict[str, Any]:
    return {
        "schema": 1,
        "generation": 3,
        "state": "proposed",
        "cluster_fingerprint": FP,
        "registration_fingerprint": FP,
        "reason": "hand-made",
        "created_at": "2026-11-30T00:00:00Z",
        "created_at_ms": 1_795_996_800_000,
        "moved": 0,
        "locality": {
            "fetch_mode": "nearest-replica",
            "before": {"cross_rack": 1, "total": 6, "fraction": 0.166667},
            "after": {"cross_rack": 0, "total": 6, "fraction": 0.0},
        },
        "publisher": {"agent_id": "agent-1", "epoch": 2},
        **body,
    }


CONSUMER_VALUE = envelope(
    consumer_group={
        "group_id": "pay",
        "assignment": {"pay-a": [["orders", 0], ["orders", 3]], "pay-b": [["orders", 1], ["orders", 4]]},
        "revoked": {"pay-b": [["orders", 2]]},
    },
    stats={"partitions": 6, "assigned": 4, "cross_rack": 0, "elapsed_ms": 0.5, "optimal": True},
    handover={"from_generation": 2, "timed_out": ["pay-c"], "unreleased": {"pay-c": [["orders", 5]]}},
)
STREAMS_VALUE = envelope(
    streams_app={
        "application_id": "clicks",
        "assignment": {
            "p-a": {"active": ["0_0", "0_3"], "standby": ["0_1"], "warmup": []},
            "p-b": {"active": ["0_1", "0_2"], "standby": ["0_0"], "warmup": ["0_3"]},
        },
        "probing_rebalance_needed": False,
    },
    stats={"tasks": 4, "active_cross_rack": 1, "standby_cross_rack": 2},
)
REVOKING_VALUE = envelope(
    state="revoking",
    consumer_group={"group_id": "pay", "assignment": {"pay-a": []}, "revoked": {"pay-b": [["orders", 0]]}},
    stats={},
    handover={
        "awaiting": ["pay-b"],
        "release_timeout_s": 30.0,
        "target": {
            "consumer_group": {"group_id": "pay", "assignment": {"pay-a": [["orders", 0]]}, "revoked": {}},
            "stats": {"moved": 1},
        },
    },
)
KEYS = {
    id(CONSUMER_VALUE): "consumer/pay",
    id(STREAMS_VALUE): "streams/clicks",
    id(REVOKING_VALUE): "consumer/pay",
}


def snapshot() -> Snapshot:
    topics = {t: TopicState(tuple(map(tuple, reps)), tuple(r[0] for r in reps)) for t, reps in TOPICS.items()}
    return Snapshot(brokers=dict(RACKS), topics={**topics, "empty": TopicState(((),), (NO_LEADER,))})


def test_the_valid_records_decode_and_validate() -> None:
    for value in (CONSUMER_VALUE, STREAMS_VALUE, REVOKING_VALUE):
        PLAN.validate(value)
        assert decode_record(KEYS[id(value)], json.dumps(value).encode()) is not None


# ---- item 1: a Streams record whose assignment is not the schema's, refused naming the field ----------


@pytest.mark.parametrize(
    ("assignment", "field"),
    [
        ([{"active": ["0_0"], "standby": [], "warmup": []}], "streams_app.assignment must be an object"),
        (None, "streams_app.assignment must be an object"),
        ({"p-a": ["0_0"]}, "streams_app.assignment['p-a'] must be an object"),
        (
            {"p-a": {"active": "0_0", "standby": [], "warmup": []}},
            "streams_app.assignment['p-a'].active must be an array of strings",
        ),
        (
            {"p-a": {"active": [{"t": 0}], "standby": [], "warmup": []}},
            "streams_app.assignment['p-a'].active must be",
        ),
        (
            {"p-a": {"active": ["0_0"], "standby": []}},
            "streams_app.assignment['p-a'].warmup must be an array",
        ),
    ],
)
def test_a_streams_record_without_the_schemas_assignment_is_refused_naming_the_field(
    assignment: Any, field: str
) -> None:
    body = {"application_id": "clicks", **({} if assignment is None else {"assignment": assignment})}
    value = {**STREAMS_VALUE, "streams_app": body}
    with pytest.raises(jsonschema.ValidationError):
        PLAN.validate(value)
    with pytest.raises(PlanDecodeError) as e:
        decode_record(b"streams/clicks", json.dumps(value).encode())
    assert str(e.value).startswith(f"streams/clicks: {field}") and e.value.reason == "invalid", str(e.value)


# ---- item 4: records that break docs/plan-schema.json are refused, the field named ----------------------


def _without(doc: dict[str, Any], *path: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(doc))
    node = out
    for k in path[:-1]:
        node = node[k]
    del node[path[-1]]
    return out


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ({**CONSUMER_VALUE, "schema": True}, "unsupported schema True"),
        (
            {**CONSUMER_VALUE, "stats": {"elapsed_ms": math.nan}},
            "stats.elapsed_ms is nan, not a finite number",
        ),
        ({**CONSUMER_VALUE, "stats": {"x": [math.inf]}}, "stats.x[0] is inf, not a finite number"),
        ({**CONSUMER_VALUE, "moved": "1"}, "moved must be an integer >= 0, not '1'"),
        ({**CONSUMER_VALUE, "moved": -1}, "moved must be an integer >= 0"),
        ({**CONSUMER_VALUE, "locality": []}, "locality must be an object"),
        (
            {
                **CONSUMER_VALUE,
                "locality": {
                    **CONSUMER_VALUE["locality"],
                    "after": {"cross_rack": 0, "total": 1, "fraction": 2},
                },
            },
            "locality.after.fraction must be a number",
        ),
        ({**CONSUMER_VALUE, "cluster_fingerprint": 7}, "cluster_fingerprint must be a string"),
        ({**CONSUMER_VALUE, "registration_fingerprint": None}, "registration_fingerprint must be a string"),
        ({**CONSUMER_VALUE, "state": "plan"}, "state must be proposed or revoking"),
        ({**CONSUMER_VALUE, "reason": ["x"]}, "reason must be a string"),
        (
            {**CONSUMER_VALUE, "consumer_group": {**CONSUMER_VALUE["consumer_group"], "revoked": []}},
            "consumer_group.revoked must be an object",
        ),
        ({**CONSUMER_VALUE, "streams_app": STREAMS_VALUE["streams_app"]}, "carries streams_app too"),
        (
            {**CONSUMER_VALUE, "publisher": {"agent_id": "a", "epoch": 1.5}},
            "publisher.epoch must be an integer",
        ),
        ({**CONSUMER_VALUE, "handover": None}, "handover must be an object"),
        ({**CONSUMER_VALUE, "handover": {"from_generation": 0, "timed_out": []}}, "neither a revoking nor"),
        (_without(STREAMS_VALUE, "streams_app", "assignment"), "streams_app.assignment must be an object"),
    ],
)
def test_a_record_that_breaks_the_schema_is_refused_naming_the_field(
    value: dict[str, Any], said: str
) -> None:
    key = "streams/clicks" if "streams_app" in value and "consumer_group" not in value else "consumer/pay"
    text = json.dumps(value)  # NaN and Infinity as Python writes them: no JSON, but the parser takes them
    with pytest.raises(PlanDecodeError) as e:
        decode_record(key, text.encode())
    assert said in str(e.value), str(e.value)
    if "NaN" not in text and "Infinity" not in text:  # JSON has no such numbers for a schema to judge
        with pytest.raises(jsonschema.ValidationError):
            PLAN.validate(json.loads(text))


def test_a_record_of_the_contracts_minimum_is_a_plan() -> None:
    """CONTRACT.md: "plus at least" schema, generation, state, cluster_fingerprint, reason, created_at,
    the body and stats; the rest of docs/plan-schema.json (moved, locality, fingerprints of 64 hex
    digits...) is what this agent writes, not what a reader may demand."""
    value = {
        "schema": 1,
        "generation": 7,
        "state": "proposed",
        "cluster_fingerprint": "…",
        "reason": "replica racks changed: orders-3, orders-7",
        "created_at": "2026-11-21T22:00:00Z",
        "consumer_group": {"group_id": "payments", "assignment": {}, "revoked": {}},
        "stats": {"partitions": 0, "assigned": 0, "cross_rack": 0, "max_minus_min": 0, "moved": 0},
    }
    rec = decode_record("consumer/payments", json.dumps(value).encode())
    assert rec is not None and rec.generation == 7 and rec.moved == 0 and rec.locality_before is None
    assert (rec.locality_after.cross_rack, rec.locality_after.total, rec.fetch_mode) == (
        0,
        0,
        "nearest-replica",
    )


# ---- the property: refused, or through every reader ----------------------------------------------------

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-2, 12)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(["", "x", "0_0", "0_9", "orders", "p-a", "pay-a", FP, "leader", "revoking"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["p-a", "active", "x"]), inner)
    ),
    max_leaves=6,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    for k, v in items:
        out.append((*prefix, k))
        out.extend(_paths(v, (*prefix, k)))
    return out


def _same_type(old: Any) -> st.SearchStrategy[Any]:
    if isinstance(old, bool):
        return st.booleans()
    if isinstance(old, int):
        return st.integers(0, 2**53 - 1) | st.integers(0, 12)
    if isinstance(old, float):
        return st.floats(0, 1)
    if isinstance(old, str):
        return st.sampled_from(
            ["", "x", "0_0", "0_7", "9_1", "_", "0_", "0_-1", "orders", "clicks", "p-b", "pay-b"]
        )
    if isinstance(old, list):
        return st.lists(st.sampled_from(old), max_size=4) if old else st.just([])
    if isinstance(old, dict) and old:
        return st.dictionaries(
            st.sampled_from(["p-a", "p-b", "p-z", "pay-a", "pay-z"]),
            st.sampled_from(list(old.values())),
            max_size=3,
        )
    return st.just(old)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    base = draw(st.sampled_from([CONSUMER_VALUE, STREAMS_VALUE, REVOKING_VALUE]))
    key = KEYS[id(base)]
    doc: dict[str, Any] = json.loads(json.dumps(base))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        old = parent[path[-1]]
        how = draw(st.sampled_from(["delete", "json", "shape", "same", "same"]))
        if how == "same":  # the same type, other content: mostly still valid, odd for the readers
            parent[path[-1]] = draw(_same_type(old))
        elif how == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif how == "shape" and isinstance(old, dict):  # an object's values as a list: the tester's record
            parent[path[-1]] = list(old.values())
        elif how == "shape" and isinstance(old, list):
            parent[path[-1]] = {str(i): v for i, v in enumerate(old)}
        else:
            parent[path[-1]] = draw(JSON)
    return key, doc


def through_every_reader(rec: PlanRecord, value: dict[str, Any]) -> None:
    """What each reader does with a plan of record; any exception fails the property."""
    snap = snapshot()
    history = KeyHistory(rec.key, rec, Seen(0, 0, 1_800_000_000_000))
    shown = key_json(history)
    json.dumps(shown, allow_nan=False)
    render_show(shown)
    if rec.kind == "consumer":
        reg = make_registration("consumer", PAY, "nearest-replica", "file")
        racks = {m["member_id"]: m["rack"] for m in PAY["members"]}
        found = explain(rec.body["assignment"], racks, snap, RACKS, rec.fetch_mode)
        holders(rec.body)
        pending_from(rec, 0.0)
    else:
        reg = make_registration("streams", CLICKS, "nearest-replica", "file")
        clients = {c["process_id"]: c["rack"] for c in CLICKS["clients"]}
        found = explain_streams(
            rec.body["assignment"], subtopologies_of(CLICKS), clients, snap, RACKS, "leader"
        )
    doc = {"key": rec.key, "generation": rec.generation, **found.as_json(), "notes": []}
    json.dumps(doc, allow_nan=False)
    render_explain(doc)
    plan_for(snap, RACKS, reg, rec)  # the next plan, sticky to this one
    plan_for(snap, RACKS, reg, rec, complete=True)
    current_locality_by_rack(snap, RACKS, reg, rec)
    best_locality(snap, RACKS, reg, rec)
    instance_document(snap, RACKS, reg, rec)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_a_record_is_refused_or_goes_through_every_reader(case: tuple[str, dict[str, Any]]) -> None:
    key, doc = case
    value = json.dumps(doc).encode()
    try:
        rec = decode_record(key, value)
    except PlanDecodeError as e:
        assert str(e) and e.reason in ("invalid", "schema", "key_mismatch", "out_of_range")
        return
    assert rec is not None
    through_every_reader(rec, json.loads(value))


# ---- the agent: one malformed record stops no cycle ----------------------------------------------------


def test_a_malformed_streams_record_on_the_plan_topic_stops_no_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tester's record (``streams/clicks`` whose assignment is a list) replayed at start-up: skipped, the
    cycle runs, ``consumer/pay`` gets its plan and ``streams/clicks`` a new one (its bad record is no plan)."""
    poison = {
        **STREAMS_VALUE,
        "streams_app": {"application_id": "clicks", "assignment": [{"active": ["0_0"]}]},
    }
    raw = [RawRecord(0, 0, b"streams/clicks", json.dumps(poison).encode(), 1, "_rackplan.plans")]
    monkeypatch.setattr(read_back_mod, "read_to_end", lambda *_a, **_k: raw)
    skipped: list[str] = []
    records = read_back_mod.read_back({}, "_rackplan.plans", 1.0, get_logger("t"), skipped.append)
    admin = FakeAdmin(TOPICS)
    doc = {"consumer_groups": [PAY], "streams_apps": [CLICKS], "mode": "observe", "change_persist_polls": 1}
    agent = Agent(Settings.model_validate(doc), admin=admin, publisher=FakePublisher(), clock=lambda: 1e6)
    agent.begin(records)
    report = agent.run_once()
    assert report.ok, report.error
    assert sorted(r.key for r in report.published) == ["consumer/pay", "streams/clicks"]
    assert agent.status().ready
    assert records == [] and skipped == ["invalid"]  # the record itself: skipped at replay, counted
