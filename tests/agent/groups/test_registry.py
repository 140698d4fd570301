"""Registrations: topic records (keys, values, tombstones, TTL), merge precedence, client-rack mapping."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rackplan.agent.groups.membership import RealGroup, RealMember
from rackplan.agent.groups.registry import RegistrationStore, decode_registration, merge_registrations
from rackplan.agent.protocol.registrations import (
    REGISTRATION_SCHEMA,
    SKIP_REASONS,
    RegistrationRecordError,
    registration_key,
)
from rackplan.agent.runtime.plans_io import racks_of
from rackplan.agent.settings.sections import RackRule, Settings, rack_for

SCHEMA = Path(__file__).resolve().parents[3] / "docs" / "registration-schema.json"
SUBS = [{"id": "0", "source_topics": ["clicks"], "changelog_topics": ["clicks-store"]}]


def member(mid: str = "m-1", group: str = "payments", **kw: Any) -> dict[str, Any]:
    return {"schema": 1, "group_id": group, "member_id": mid, "rack": "az-a", "topics": ["orders"], **kw}


def client(pid: str = "p-1", app: str = "clicks", **kw: Any) -> dict[str, Any]:
    return {"schema": 1, "application_id": app, "process_id": pid, "rack": "az-a", "threads": 2, **kw}


def enc(v: Any) -> bytes:
    return json.dumps(v).encode()


def key_of(v: dict[str, Any]) -> str:
    if "group_id" in v:
        return registration_key("consumer", v["group_id"], v["member_id"])
    return registration_key("streams", v["application_id"], v["process_id"])


# ---- records -------------------------------------------------------------------------


def test_consumer_record() -> None:
    e = decode_registration(b"consumer/payments/m-1", enc(member(assignor="rack-optimal", timestamp_ms=5)), 9)
    assert e is not None and e.kind == "consumer" and e.name == "payments" and e.timestamp_ms == 5
    assert e.member == {"member_id": "m-1", "rack": "az-a", "topics": ["orders"]}
    assert e.group == {"assignor": "rack-optimal"}


def test_streams_record_and_the_record_timestamp_fallback() -> None:
    e = decode_registration("streams/clicks/p-1", enc(client(tags={"zone": "a"}, subtopologies=SUBS)), 1234)
    assert e is not None and e.kind == "streams" and e.timestamp_ms == 1234
    assert e.member == {"process_id": "p-1", "rack": "az-a", "threads": 2, "tags": {"zone": "a"}}
    assert e.group == {"subtopologies": SUBS}


def test_a_streams_record_keeps_its_clients_thread_consumers() -> None:
    ids = ["web-StreamThread-1-consumer-4f1c", "web-StreamThread-2-consumer-9a0b"]
    e = decode_registration("streams/clicks/p-1", enc(client(consumer_client_ids=ids, subtopologies=SUBS)), 1)
    assert e is not None and e.member["consumer_client_ids"] == ids and "consumer_client_ids" not in e.group
    (reg,) = merge_registrations(settings(), [e]).registrations
    assert reg.spec["clients"][0]["consumer_client_ids"] == ids


def test_ids_with_slashes_are_unambiguous() -> None:
    assert registration_key("consumer", "a/b", "c") == "consumer/a%2Fb/c"
    assert registration_key("consumer", "a", "b/c") == "consumer/a/b%2Fc"
    assert registration_key("streams", "50%", "p") == "streams/50%25/p"
    e = decode_registration("consumer/a%2Fb/c", enc(member("c", group="a/b")), None)
    assert e is not None and e.name == "a/b" and e.member["member_id"] == "c"
    with pytest.raises(RegistrationRecordError) as err:
        decode_registration("consumer/a/b/c", enc(member("c", group="a/b")), None)
    assert err.value.reason == "key_mismatch"


def test_tombstone() -> None:
    assert decode_registration(b"consumer/payments/m-1", None, 1) is None


MALFORMED: list[tuple[Any, Any, str]] = [
    (None, enc(member()), "bad_key"),
    (b"payments/m-1", enc(member()), "bad_key"),
    (b"consumer/payments", enc(member()), "bad_key"),
    (b"\xff\xfe", enc(member()), "not_utf8"),
    (b"consumer/payments/m-1", b"{not json", "not_json"),
    (b"consumer/payments/m-1", b"\xff", "not_utf8"),
    (b"consumer/payments/m-1", b"[1]", "not_object"),
    (b"consumer/payments/m-1", enc({**member(), "schema": 2}), "schema"),
    (b"consumer/payments/m-2", enc(member()), "key_mismatch"),
    (b"consumer/payments/m-1", enc({**member(), "topics": "orders"}), "invalid"),
    (b"consumer/payments/m-1", enc({**member(), "rack": 3}), "invalid"),
    (b"consumer/payments/m-1", enc({**member(), "assignor": "magic"}), "invalid"),
    (b"consumer/payments/m-1", enc({**member(), "fetch_mode": "closest"}), "invalid"),
    (b"consumer/payments/m-1", enc({**member(), "timestamp_ms": -1}), "invalid"),
    (b"consumer/payments/", enc({**member(), "member_id": ""}), "invalid"),
    (b"streams/clicks/p-1", enc({**client(), "threads": 0}), "invalid"),
    (
        b"streams/clicks/p-1",
        enc({**client(), "subtopologies": [{"id": "0", "source_topics": []}]}),
        "invalid",
    ),
    (
        b"streams/clicks/p-1",
        enc({**client(), "consumer_client_ids": "web-StreamThread-1-consumer"}),
        "invalid",
    ),
    (b"streams/clicks/p-1", enc({**client(), "consumer_client_ids": [1]}), "invalid"),
    (b"streams/clicks/p-1", enc({**client(), "consumer_client_ids": [""]}), "invalid"),
    (b"streams/clicks/p-1", enc({**client(), "consumer_client_ids": {"a": "b"}}), "invalid"),
]


@pytest.mark.parametrize(("key", "value", "reason"), MALFORMED)
def test_malformed_records_name_their_reason(key: Any, value: Any, reason: str) -> None:
    with pytest.raises(RegistrationRecordError) as e:
        decode_registration(key, value, 1)
    assert e.value.reason == reason and e.value.reason in SKIP_REASONS and str(e.value)


def test_schema_file_agrees_with_the_decoder() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    good = [
        member(),
        member(assignor="range", fetch_mode="leader", group_instance_id="i-1", timestamp_ms=0, rack=None),
        member(follower=True, released_generation=3, mode="subscription"),
        client(),
        client(subtopologies=SUBS, num_standby_replicas=1, rack_aware={"strategy": "min_traffic"}),
        client(consumer_client_ids=["web-StreamThread-1-consumer-4f1c", "web-StreamThread-2-consumer-9a0b"]),
        client(consumer_client_ids=[]),
    ]
    for v in good:
        jsonschema.validate(v, schema)
        assert decode_registration(key_of(v), enc(v), 1) is not None
    bad = [
        {**member(), "schema": 2},
        {**member(), "topics": "orders"},
        {**member(), "assignor": "magic"},
        {**member(), "timestamp_ms": -5},
        {k: v for k, v in member().items() if k != "member_id"},
        {**client(), "threads": 0},
        {**client(), "rack": 1},
        {**client(), "consumer_client_ids": "web-StreamThread-1-consumer"},
        {**client(), "consumer_client_ids": [""]},
        {**client(), "consumer_client_ids": [7]},
        {**member(), "follower": True, "mode": "asleep"},
        {**member(), "follower": True, "released_generation": -1},
    ]
    for v in bad:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(v, schema)
        with pytest.raises(RegistrationRecordError):
            decode_registration(
                key_of({**member(), **v}) if "group_id" in v else key_of({**client(), **v}), enc(v), 1
            )


# ---- the store: tombstones, heartbeats, TTL ---------------------------------------------------


def entry(v: dict[str, Any], ts: int | None = None) -> Any:
    return decode_registration(key_of(v), enc(v), ts)


def test_store_applies_records_in_order() -> None:
    s = RegistrationStore(ttl_s=0)
    assert s.apply("consumer/payments/m-1", entry(member(), 10), now_ms=10)
    v1 = s.version
    assert not s.apply("consumer/payments/m-1", entry(member(), 20), now_ms=20)  # heartbeat: no change
    assert s.version == v1 and s.entries()[0].timestamp_ms == 20
    assert s.apply("consumer/payments/m-1", entry(member(rack="az-b"), 30), now_ms=30)
    assert s.apply("consumer/payments/m-1", None, now_ms=40)
    assert not s.apply("consumer/payments/m-1", None, now_ms=50)
    assert len(s) == 0 and s.expire(10**15) == []  # ttl 0: never expires


def test_stale_entries_expire_after_the_ttl() -> None:
    s = RegistrationStore(ttl_s=60)
    s.apply("consumer/payments/m-1", entry(member("m-1", timestamp_ms=0)), now_ms=0)
    s.apply("consumer/payments/m-2", entry(member("m-2"), ts=30_000), now_ms=30_000)
    s.apply("consumer/payments/m-3", entry(member("m-3"), ts=None), now_ms=45_000)  # no timestamp: arrival
    assert s.expire(60_000) == []
    v = s.version
    assert s.expire(60_001) == ["consumer/payments/m-1"] and s.version == v + 1
    assert s.expire(105_001) == ["consumer/payments/m-2", "consumer/payments/m-3"]


# ---- merge precedence ---------------------------------------------------------------------


def settings(**doc: Any) -> Settings:
    return Settings.model_validate(doc)


def test_topic_only_group_takes_group_fields_from_the_newest_record() -> None:
    entries = [
        entry(member("m-1", assignor="range", timestamp_ms=1)),
        entry(member("m-2", assignor="rack-optimal", fetch_mode="leader", timestamp_ms=2, rack="az-b")),
    ]
    merged = merge_registrations(settings(), entries)
    (reg,) = merged.registrations
    assert reg.key == "consumer/payments" and reg.source == "topic" and reg.fetch_mode == "leader"
    assert reg.spec["assignor"] == "rack-optimal"
    assert [m["member_id"] for m in reg.spec["members"]] == ["m-1", "m-2"]
    assert reg.topics == frozenset({"orders"})


def test_a_registered_group_chooses_its_traffic_objective_and_balance() -> None:
    # issue 26: a group may choose its objective in its registration, not only in the settings file
    entries = [
        entry(member("m-1", assignor="rack-optimal", objective="bytes", timestamp_ms=1)),
        entry(member("m-2", assignor="rack-optimal", balance="bytes", balance_floor=1024.0, timestamp_ms=2)),
    ]
    (reg,) = merge_registrations(settings(), entries).registrations
    assert {k: reg.spec[k] for k in ("assignor", "objective", "balance", "balance_floor")} == {
        "assignor": "rack-optimal",
        "objective": "bytes",
        "balance": "bytes",
        "balance_floor": 1024.0,
    }
    app = client("p-1", subtopologies=SUBS, rack_aware={"strategy": "min_traffic", "weigh_by_traffic": True})
    (streams,) = merge_registrations(settings(), [entry(app)]).registrations
    assert streams.spec["rack_aware"]["weigh_by_traffic"] is True


def test_a_bytes_objective_for_an_assignor_that_cannot_honour_it_is_refused() -> None:
    # one record: checked as the contract's group on its own, and skipped
    with pytest.raises(RegistrationRecordError, match=r"objective: 'bytes' needs assignor 'rack-optimal'"):
        decode_registration(b"consumer/payments/m-1", enc(member(assignor="range", objective="bytes")), 9)
    # a newer record of another member switches the group to range: the merged group is the problem
    entries = [
        entry(member("m-1", assignor="rack-optimal", objective="bytes", timestamp_ms=1)),
        entry(member("m-2", assignor="range", timestamp_ms=2)),
    ]
    merged = merge_registrations(settings(), entries)
    assert merged.registrations == [] and "objective" in merged.problems["consumer/payments"]


@pytest.mark.parametrize(
    "fields", [{"objective": "dollars"}, {"balance": "load"}, {"balance_floor": -1}], ids=str
)
def test_bad_traffic_fields_in_a_registration_are_skipped(fields: dict[str, Any]) -> None:
    with pytest.raises(RegistrationRecordError):
        decode_registration(b"consumer/payments/m-1", enc(member(**fields)), 9)


def test_the_settings_file_wins_and_the_topic_adds_members_when_allowed() -> None:
    file_group = {
        "group_id": "payments",
        "assignor": "range",
        "members": [{"member_id": "m-1", "rack": "az-c", "topics": ["orders"]}],
    }
    s = settings(consumer_groups=[file_group], registrations={"allow_override_settings_groups": True})
    entries = [entry(member("m-1", assignor="rack-optimal")), entry(member("m-2", rack="az-b"))]
    (reg,) = merge_registrations(s, entries).registrations
    assert reg.source == "file+topic" and reg.spec["assignor"] == "range"
    assert reg.spec["members"] == [
        {"member_id": "m-1", "rack": "az-c", "topics": ["orders"]},  # the file's m-1, not the topic's
        {"member_id": "m-2", "rack": "az-b", "topics": ["orders"]},
    ]
    (alone,) = merge_registrations(s, []).registrations
    assert alone.source == "file" and alone.fingerprint != reg.fingerprint  # a new member: re-planned


def test_streams_clients_merge_and_an_app_needs_its_topology() -> None:
    merged = merge_registrations(settings(), [entry(client("p-1")), entry(client("p-2"))])
    assert merged.registrations == [] and "subtopologies" in merged.problems["streams/clicks"]
    merged = merge_registrations(settings(), [entry(client("p-1", subtopologies=SUBS)), entry(client("p-2"))])
    (reg,) = merged.registrations
    assert reg.kind == "streams" and [c["process_id"] for c in reg.spec["clients"]] == ["p-1", "p-2"]
    assert reg.topics == frozenset({"clicks", "clicks-store"})


def test_fingerprints_ignore_heartbeats() -> None:
    a = merge_registrations(settings(), [entry(member(timestamp_ms=1))]).registrations[0]
    b = merge_registrations(settings(), [entry(member(timestamp_ms=99))]).registrations[0]
    assert a.fingerprint == b.fingerprint


def test_thread_consumers_that_rejoin_never_plan_the_app_again() -> None:
    # A thread consumer's id changes when it rejoins; the plan does not depend on it.
    a, b = (
        merge_registrations(
            settings(), [entry(client(subtopologies=SUBS, consumer_client_ids=ids))]
        ).registrations[0]
        for ids in (["web-StreamThread-1-consumer-1"], ["web-StreamThread-1-consumer-2"])
    )
    assert a.spec != b.spec and a.fingerprint == b.fingerprint
    c = merge_registrations(settings(), [entry(client(subtopologies=SUBS, threads=3))]).registrations[0]
    assert c.fingerprint != a.fingerprint, "the client's planned fields still plan it again"


def test_members_of_an_unregistered_group_come_from_describe_groups_and_rack_mapping() -> None:
    s = settings(
        consumer_groups=[{"group_id": "legacy", "assignor": "range", "members": [], "topics": ["orders"]}],
        rack_mapping=[
            {"client_id": "legacy-az-a-*", "rack": "az-a"},
            {"host": "10.0.2.0/24", "rack": "az-b"},
        ],
    )
    real = RealGroup(
        "legacy",
        "STABLE",
        (
            RealMember("c-1", "legacy-az-a-7", "10.0.9.1", None, (("orders", 0),)),
            RealMember("c-2", "other", "10.0.2.17", "inst-2", (("orders", 1),)),
            RealMember("c-3", "other", "10.0.3.1", None, ()),
        ),
    )
    (without,) = merge_registrations(s, []).registrations
    assert without.source == "file" and without.members == 0  # planned once members are known
    (reg,) = merge_registrations(s, [], {"legacy": real}).registrations
    assert reg.source == "file+discovered"
    assert reg.spec["members"] == [  # a static member by its group.instance.id: what the Java plugins match
        {"member_id": "c-1", "rack": "az-a", "topics": ["orders"]},
        {"member_id": "c-3", "rack": None, "topics": ["orders"]},
        {"member_id": "inst-2", "rack": "az-b", "topics": ["orders"], "group_instance_id": "inst-2"},
    ]
    # `rackplan plans explain/diff` place the plan's members as the plan names them
    planned: dict[str, list[Any]] = {m["member_id"]: [] for m in reg.spec["members"]}
    planned_racks, live_racks = racks_of(reg, real, planned, s)
    assert planned_racks == {"c-1": "az-a", "inst-2": "az-b"} and live_racks["c-2"] == "az-b"


# ---- rack mapping rules ---------------------------------------------------------------------


def test_rack_rules() -> None:
    rules = (
        RackRule(rack="az-a", host="10.0.1.0/24", client_id="pay-*"),  # both must match
        RackRule(rack="az-b", host="10.0.1.0/24"),
        RackRule(rack="az-c", client_id="*-az-c-*"),
        RackRule(rack="v6", host="2001:db8::/32"),
        RackRule(rack="one", host="192.168.0.7"),
    )
    assert rack_for(rules, "pay-1", "/10.0.1.5") == "az-a"  # Kafka's "/host" form
    assert rack_for(rules, "audit-1", "10.0.1.5") == "az-b"  # first matching rule wins
    assert rack_for(rules, "x-az-c-1", "10.0.7.5") == "az-c"
    assert rack_for(rules, "x", "2001:db8::1") == "v6"
    assert rack_for(rules, "x", "192.168.0.7") == "one" and rack_for(rules, "x", "192.168.0.8") is None
    assert rack_for(rules, "x", "broker-host.example") is None  # not an address: CIDR rules do not match
    assert rack_for(rules, None, None) is None
    assert rack_for(rules, "PAY-1", "10.0.1.5") == "az-b"  # patterns are case-sensitive


@pytest.mark.parametrize(
    "rule",
    [
        {"rack": "a"},
        {"rack": "a", "host": "10.0.0.0/33"},
        {"rack": "", "client_id": "*"},
        {"host": "10.0.0.1"},
    ],
)
def test_bad_rack_rules_are_rejected(rule: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="rack_mapping"):
        settings(rack_mapping=[rule])


def test_rack_mapping_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RACKPLAN_RACK_MAPPING", '[{"client_id": "a-*", "rack": "az-a"}]')
    assert Settings.load().rack_mapping == (RackRule(rack="az-a", client_id="a-*"),)


def test_schema_constant() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    branches = [schema["$defs"][ref["$ref"].rsplit("/", 1)[1]] for ref in schema["oneOf"]]
    assert len(branches) == 2
    assert all(b["properties"]["schema"]["const"] == REGISTRATION_SCHEMA for b in branches)


def test_follower_records_round_trip_and_never_replan() -> None:
    from rackplan.agent.groups.registry import RegistrationStore
    from rackplan.agent.protocol.registrations import FollowerStatus, consumer_registration

    key, value = consumer_registration(
        "pay",
        "m-1",
        rack="az-a",
        topics=["b", "a", "a"],
        timestamp_ms=1000,
        group_instance_id="m-1",
        assignor="range",
        follower=FollowerStatus(released_generation=4, mode="plan"),
    )
    e = decode_registration(key, value, None)
    assert e is not None and key == "consumer/pay/m-1"
    assert e.member == {"member_id": "m-1", "rack": "az-a", "topics": ["a", "b"], "group_instance_id": "m-1"}
    assert e.group == {"assignor": "range"} and e.follower == FollowerStatus(4, "plan")
    store = RegistrationStore(ttl_s=60)
    assert store.apply(key, e, 1000)
    v = store.version
    _, later = consumer_registration(
        "pay",
        "m-1",
        rack="az-a",
        topics=["a", "b"],
        timestamp_ms=2000,
        group_instance_id="m-1",
        assignor="range",
        follower=FollowerStatus(released_generation=5, mode="subscription"),
    )
    assert not store.apply(key, decode_registration(key, later, None), 2000), "a release is not a re-plan"
    assert store.version == v
    assert store.followers("consumer", "pay") == {"m-1": FollowerStatus(5, "subscription")}
    assert store.followers("consumer", "other") == {}
    _, plain = consumer_registration("pay", "m-2", rack=None, topics=["a"], timestamp_ms=1)
    e2 = decode_registration("consumer/pay/m-2", plain, None)
    assert e2 is not None and e2.follower is None and "follower" not in json.loads(plain)


@pytest.mark.parametrize(
    ("fields", "text"),
    [
        ({"follower": "yes"}, "follower must be true or false"),
        ({"follower": True, "released_generation": -1}, "released_generation"),
        ({"follower": True, "released_generation": True}, "released_generation"),
        ({"follower": True, "mode": "asleep"}, "mode must be one of"),
    ],
)
def test_malformed_follower_fields_are_skipped_with_a_reason(fields: dict[str, Any], text: str) -> None:
    value = {"schema": 1, "group_id": "pay", "member_id": "m", "topics": ["a"], **fields}
    with pytest.raises(RegistrationRecordError, match=text) as e:
        decode_registration(b"consumer/pay/m", json.dumps(value).encode(), None)
    assert e.value.reason == "invalid"
