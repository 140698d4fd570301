"""The protocol package: schema files generated from the models, and the hand-written encoders' records
valid under both (the encoders are the oracle: their bytes are fingerprinted and parsed by the Java clients)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter, ValidationError

from rackplan.agent.protocol import registrations as reg
from rackplan.agent.protocol.alerts import FIRING, RESOLVED, UNFIXABLE, AlertEvent
from rackplan.agent.protocol.lease import MAX_INTERVAL_S, Heartbeat, decode_heartbeat
from rackplan.agent.protocol.models import (
    AlertValue,
    HeartbeatValue,
    PlanValue,
    RegistrationValue,
)
from rackplan.agent.protocol.plans import (
    CONSUMER,
    STATE_PROPOSED,
    STATE_REVOKING,
    STREAMS,
    Locality,
    PlanDecodeError,
    PlanRecord,
    decode_record,
    encode_value,
    fingerprint,
    plan_key,
    utc_now_iso,
)
from rackplan.agent.protocol.records import MAX_SAFE_INT
from rackplan.agent.protocol.schemas import FILES, SchemaFile, generate, load, render
from rackplan.agent.protocol.schemas.__main__ import main as schemas_main

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "agent" / "protocol" / "schemas"
SCHEMAS = {f.name: generate(f) for f in FILES}
EXAMPLES = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = SCHEMAS[name]
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


PLAN, REGISTRATION, LEASE, ALERT = (
    _validator(n)
    for n in ("plan-schema.json", "registration-schema.json", "lease-schema.json", "alert-schema.json")
)


# ---- the files are what the models generate ------------------------------------------------------------


@pytest.mark.parametrize("spec", FILES, ids=lambda f: f.name)
def test_schema_files_equal_what_the_models_generate(spec: SchemaFile) -> None:
    text = render(spec)
    assert (ROOT / "docs" / spec.name).read_text(encoding="utf-8") == text, (
        f"docs/{spec.name} drifted from the models: python -m rackplan.agent.protocol.schemas --write"
    )
    assert (PACKAGE / spec.name).read_text(encoding="utf-8") == text
    assert load(spec.name) == json.loads(text)  # what importlib.resources reads from the package
    assert render(spec) == text  # deterministic


def test_docs_hold_no_other_schema_files() -> None:
    assert {p.name for p in (ROOT / "docs").glob("*schema*.json")} == {f.name for f in FILES}
    assert {p.name for p in PACKAGE.glob("*.json")} == {f.name for f in FILES}


def test_the_command_checks_and_regenerates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rackplan.agent.protocol.schemas.__main__ as cli

    assert schemas_main([]) == 0  # the checkout is in step
    monkeypatch.setattr(cli, "targets", lambda: [tmp_path])
    for f in FILES:
        (tmp_path / f.name).write_text(render(f), encoding="utf-8")
    stale = tmp_path / "lease-schema.json"
    stale.write_text(
        stale.read_text(encoding="utf-8").replace('"minimum": 0', '"minimum": 1'), encoding="utf-8"
    )
    assert schemas_main([]) == 1
    assert schemas_main(["--write"]) == 0
    assert schemas_main([]) == 0 and stale.read_text(encoding="utf-8") == render(FILES[1])


# ---- the encoders' records validate (hypothesis: today's encoders are the oracle) ------------------------

names = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=12)
hexes = st.text("0123456789abcdef", min_size=64, max_size=64)
small = st.integers(0, 50)


@st.composite
def localities(draw: st.DrawFn) -> Locality:
    total = draw(small)
    return Locality(draw(st.integers(0, total)), total)


def tps(topic: st.SearchStrategy[str] = names) -> st.SearchStrategy[list[list[Any]]]:
    return st.lists(st.tuples(topic, st.integers(0, 1000)).map(list), max_size=4)


consumer_bodies = st.builds(
    lambda assignment, revoked: {"assignment": assignment, "revoked": revoked},
    st.dictionaries(names, tps(), max_size=3),
    st.dictionaries(names, tps(), max_size=2),
)
streams_bodies = st.builds(
    lambda assignment, probing: {"assignment": assignment, "probing_rebalance_needed": probing},
    st.dictionaries(
        names,
        st.fixed_dictionaries(
            {
                k: st.lists(st.from_regex(r"\A[0-9]_[0-9]\Z"), max_size=3)
                for k in ("active", "standby", "warmup")
            }
        ),
        max_size=3,
    ),
    st.booleans(),
)
stats = st.dictionaries(
    st.sampled_from(["partitions", "assigned", "cross_rack", "moved", "elapsed_ms", "optimal"]),
    st.one_of(small, st.floats(0, 100, allow_nan=False), st.booleans()),
)


@st.composite
def plan_records(draw: st.DrawFn) -> PlanRecord:
    kind = draw(st.sampled_from([CONSUMER, STREAMS]))
    name = draw(names)
    if kind == CONSUMER:
        body = {"group_id": name, **draw(consumer_bodies)}
        document = {"consumer_group": body, "stats": draw(stats)}
    else:
        document = {"streams_app": {"application_id": name, **draw(streams_bodies)}, "stats": draw(stats)}
    handover = None
    if kind == CONSUMER:
        handover = draw(
            st.one_of(
                st.none(),
                st.builds(
                    lambda awaiting, target, timeout: {
                        "awaiting": awaiting,
                        **({} if timeout is None else {"release_timeout_s": timeout}),
                        "target": {"consumer_group": {"group_id": name, **target}, "stats": {}},
                    },
                    st.lists(names, max_size=3),
                    consumer_bodies,
                    st.none() | st.floats(0, 600, allow_nan=False),
                ),
                st.builds(
                    lambda g, late: {"from_generation": g, "timed_out": late},
                    st.integers(1, MAX_SAFE_INT),
                    st.lists(names, max_size=3),
                ),
            )
        )
    return PlanRecord(
        key=plan_key(kind, name),
        generation=draw(st.integers(1, MAX_SAFE_INT)),
        cluster_fingerprint=draw(hexes),
        registration_fingerprint=draw(hexes),
        reason=draw(st.text(max_size=40)),
        created_at=utc_now_iso(draw(st.floats(0, 4e9, allow_nan=False))),
        document=document,
        moved=draw(small),
        fetch_mode=draw(st.sampled_from(["nearest-replica", "leader"])),
        locality_before=draw(st.none() | localities()),
        locality_after=draw(localities()),
        state=draw(st.sampled_from([STATE_PROPOSED, STATE_REVOKING])),
        handover=handover,
        publisher=draw(
            st.none() | st.fixed_dictionaries({"agent_id": names, "epoch": st.integers(0, MAX_SAFE_INT)})
        ),
    )


def _valid(model: Any, validator: jsonschema.Draft202012Validator, value: bytes) -> None:
    """``value`` passes the pydantic model (strict JSON) and the generated schema."""
    if isinstance(model, type) and issubclass(model, BaseModel):
        model.model_validate_json(value)
    else:
        TypeAdapter(model).validate_json(value)
    validator.validate(json.loads(value))


@EXAMPLES
@given(plan_records())
def test_plan_records_validate_and_round_trip_byte_identically(rec: PlanRecord) -> None:
    value = encode_value(rec)
    _valid(PlanValue, PLAN, value)
    back = decode_record(rec.key.encode(), value)
    assert back is not None and encode_value(back) == value
    assert fingerprint(json.loads(value)) == fingerprint(back.value())


@EXAMPLES
@given(
    st.builds(
        Heartbeat,
        names,
        st.integers(0, MAX_SAFE_INT),
        st.integers(0, MAX_SAFE_INT),
        st.floats(1e-3, 2 * MAX_INTERVAL_S, allow_nan=False),
        st.none() | names,
        st.booleans(),
    )
)
def test_heartbeats_validate_and_round_trip(hb: Heartbeat) -> None:
    value = hb.encode()
    _valid(HeartbeatValue, LEASE, value)
    assert decode_heartbeat(b"leader", value).encode() == value


@EXAMPLES
@given(
    key=st.builds(plan_key, st.sampled_from([CONSUMER, STREAMS]), names),
    status=st.sampled_from([FIRING, RESOLVED, UNFIXABLE]),
    fractions=st.lists(st.floats(0, 1, allow_nan=False), min_size=4, max_size=4),
    planned=st.booleans(),
    times=st.lists(st.floats(0, 4e9, allow_nan=False), min_size=2, max_size=2),
    severity=names,
)
def test_alert_events_validate(
    key: str, status: str, fractions: list[float], planned: bool, times: list[float], severity: str
) -> None:
    before, now, plan, threshold = fractions
    at, started_at = times
    ev = AlertEvent(
        key,
        status,
        before,
        now,
        plan if planned else None,
        threshold,
        "why",
        at,
        started_at,
        severity,
        "rb#x",
    )
    value = ev.encode()
    _valid(AlertValue, ALERT, value)
    assert json.loads(value) == ev.as_json()


@EXAMPLES
@given(
    group=names,
    member=names,
    rack=st.none() | names,
    topics=st.lists(names, max_size=4),
    ts=st.integers(0, MAX_SAFE_INT),
    instance=st.none() | names,
    assignor=st.sampled_from([None, "range", "cooperative-sticky", "rack-optimal"]),
    fetch_mode=st.sampled_from([None, "nearest-replica", "leader"]),
    follower=st.none()
    | st.builds(reg.FollowerStatus, st.integers(0, MAX_SAFE_INT), st.sampled_from(reg.FOLLOWER_MODES)),
    secret=st.none() | st.binary(min_size=1, max_size=16),
)
def test_consumer_registrations_validate(
    group: str,
    member: str,
    rack: str | None,
    topics: list[str],
    ts: int,
    instance: str | None,
    assignor: str | None,
    fetch_mode: str | None,
    follower: reg.FollowerStatus | None,
    secret: bytes | None,
) -> None:
    key, value = reg.consumer_registration(
        group,
        member,
        rack=rack,
        topics=topics,
        timestamp_ms=ts,
        group_instance_id=instance,
        assignor=assignor,
        fetch_mode=fetch_mode,
        follower=follower,
        secret=secret,
    )
    _valid(RegistrationValue, REGISTRATION, value)
    checked: list[tuple[str, str]] = []
    entry = reg.decode_registration(
        key, value, ts, check=lambda kind, spec, where: checked.append((kind, where)), secret=secret
    )
    assert entry is not None and entry.member["member_id"] == member and entry.follower == follower
    assert checked == [(CONSUMER, key)]


def test_streams_registration_validates_as_the_streams_branch() -> None:
    v = {
        "schema": 1,
        "application_id": "clicks",
        "process_id": "p-1",
        "rack": "az-a",
        "threads": 2,
        "subtopologies": [{"id": "0", "source_topics": ["clicks"], "stateful": True}],
        "rack_aware": {"strategy": "min_traffic"},
    }
    value = json.dumps(v).encode()
    _valid(RegistrationValue, REGISTRATION, value)
    with pytest.raises(jsonschema.ValidationError):  # one kind or the other, never both
        REGISTRATION.validate({**v, "group_id": "g", "member_id": "m", "topics": []})


# ---- what the decoders refuse as malformed, the schemas refuse too ------------------------------------

GOOD_PLAN = {
    "schema": 1,
    "generation": 3,
    "state": "proposed",
    "cluster_fingerprint": "a" * 64,
    "reason": "r",
    "created_at": "2026-11-21T22:00:00Z",
    "moved": 0,
    "locality": {
        "fetch_mode": "leader",
        "before": None,
        "after": {"cross_rack": 0, "total": 1, "fraction": 0.0},
    },
    "consumer_group": {"group_id": "g", "assignment": {"m": [["t", 0]]}, "revoked": {}},
    "stats": {},
}


@pytest.mark.parametrize(
    "change",
    [
        {"schema": 2},
        {"generation": 0},
        {"generation": MAX_SAFE_INT + 1},
        {"generation": "3"},
        {"stats": []},
        {"consumer_group": {"group_id": "g", "assignment": {"m": [["t", -1]]}, "revoked": {}}},
        {"consumer_group": {"group_id": "g", "assignment": {"m": [["t", 0, 1]]}, "revoked": {}}},
        {"consumer_group": {"group_id": "g", "assignment": {"m": "t-0"}, "revoked": {}}},
        {"consumer_group": {"group_id": "g", "assignment": [], "revoked": {}}},
        {"handover": ["awaiting"]},
        {"publisher": "agent-1"},
    ],
)
def test_plan_values_the_decoder_refuses_the_schema_and_model_refuse(change: dict[str, Any]) -> None:
    bad = {**GOOD_PLAN, **change}
    value = json.dumps(bad).encode()
    PLAN.validate(GOOD_PLAN)
    decode_record("consumer/g", json.dumps(GOOD_PLAN).encode())
    with pytest.raises(PlanDecodeError):
        decode_record("consumer/g", value)
    with pytest.raises(jsonschema.ValidationError):
        PLAN.validate(bad)
    with pytest.raises(ValidationError):
        PlanValue.model_validate_json(value)


@pytest.mark.parametrize(
    "change",
    [{"schema": 2}, {"epoch": -1}, {"timestamp_ms": MAX_SAFE_INT + 1}, {"interval_s": 0}, {"agent_id": ""}],
)
def test_heartbeats_the_decoder_refuses_the_schema_refuses(change: dict[str, Any]) -> None:
    good = {"schema": 1, "agent_id": "a", "epoch": 1, "timestamp_ms": 5, "interval_s": 1.5}
    bad = {**good, **change}
    LEASE.validate(good)
    with pytest.raises(jsonschema.ValidationError):
        LEASE.validate(bad)
    with pytest.raises(ValueError):
        decode_heartbeat(b"leader", json.dumps(bad).encode())


# ---- property: a value the decoder refuses (key aside), the model refuses --------------------------------

ODD = st.sampled_from(
    [None, 0, -1, 1.0, 1.5, True, "", "x", [], {}, [["t", -1]], [["t", 0, 0]], MAX_SAFE_INT + 1, {"m": "t"}]
)


def _paths(doc: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for k, v in doc.items():
        out.append((*prefix, k))
        if isinstance(v, dict):
            out.extend(_paths(v, (*prefix, k)))
    return out


def _mutated(doc: dict[str, Any], path: tuple[str, ...], delete: bool, new: Any) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(doc))
    node = out
    for k in path[:-1]:
        node = node[k]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = new
    return out


@EXAMPLES
@given(plan_records(), st.data())
def test_a_plan_the_decoder_refuses_the_model_refuses(rec: PlanRecord, data: st.DataObject) -> None:
    doc = json.loads(encode_value(rec))
    path = data.draw(st.sampled_from(_paths(doc)))
    value = json.dumps(_mutated(doc, path, data.draw(st.booleans()), data.draw(ODD))).encode()
    try:
        decode_record(rec.key, value)
    except PlanDecodeError as e:
        if e.reason != "key_mismatch":  # the key is no part of the value
            with pytest.raises(ValidationError):
                PlanValue.model_validate_json(value)


@EXAMPLES
@given(
    st.builds(
        Heartbeat, names, st.integers(0, 99), st.integers(0, 99), st.floats(1e-3, 9), st.none() | names
    ),
    st.data(),
)
def test_a_heartbeat_the_decoder_refuses_the_model_refuses(hb: Heartbeat, data: st.DataObject) -> None:
    doc = json.loads(hb.encode())
    path = data.draw(st.sampled_from(_paths(doc)))
    value = json.dumps(_mutated(doc, path, data.draw(st.booleans()), data.draw(ODD))).encode()
    try:
        decode_heartbeat(b"leader", value)
    except ValueError:
        with pytest.raises(ValidationError):
            HeartbeatValue.model_validate_json(value)
