"""Real group membership from DescribeGroups: parsing, member racks, and degrading when brokers cannot say."""

from __future__ import annotations

import io
import json
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from rackplan.agent.core.logging import configure, get_logger
from rackplan.agent.groups.membership import (
    GroupDescriber,
    MemberRacks,
    RealGroup,
    RealMember,
    member_racks,
    real_group,
)
from rackplan.agent.metrics.registry import Metrics
from rackplan.agent.settings.sections import MembershipSettings, RackRule
from rackplan.agent.testing import FakeAdmin


@dataclass
class TP:
    topic: str
    partition: int


@dataclass
class Assignment:
    topic_partitions: list[TP]


@dataclass
class Member:
    member_id: str
    client_id: str
    host: str
    assignment: Assignment
    group_instance_id: str | None = None


@dataclass
class State:
    name: str


@dataclass
class Desc:
    group_id: str
    members: list[Member]
    state: State = field(default_factory=lambda: State("STABLE"))


def done(v: Any) -> Future[Any]:
    f: Future[Any] = Future()
    f.set_result(v)
    return f


def failed(code: int) -> Future[Any]:
    f: Future[Any] = Future()
    f.set_exception(KafkaException(KafkaError(code)))
    return f


def desc() -> Desc:
    return Desc(
        "payments",
        [
            Member(
                "m-2", "pay-az-b-1", "/10.0.2.9", Assignment([TP("orders", 3), TP("orders", 1)]), "inst-2"
            ),
            Member("m-1", "pay-az-a-1", "/10.0.1.9", Assignment([TP("orders", 0)])),
        ],
    )


def test_real_group_is_plain_sorted_data() -> None:
    g = real_group(desc())
    assert g.group_id == "payments" and g.state == "STABLE"
    assert [m.member_id for m in g.members] == ["m-1", "m-2"]
    assert g.members[1] == RealMember(
        "m-2", "pay-az-b-1", "10.0.2.9", "inst-2", (("orders", 1), ("orders", 3))
    )
    assert g.assignment() == {"m-1": [["orders", 0]], "m-2": [["orders", 1], ["orders", 3]]}
    assert g.topics() == ["orders"]


def test_member_racks_registration_first_then_rules() -> None:
    g = real_group(desc())
    rules = (RackRule(rack="az-b", host="10.0.2.0/24"), RackRule(rack="az-a", client_id="pay-az-a-*"))
    assert member_racks(g, [], rules) == MemberRacks({"m-1": "az-a", "m-2": "az-b"})
    registered: list[dict[str, str | None]] = [
        {"member_id": "m-1", "rack": "az-c"},
        {"member_id": "old", "group_instance_id": "inst-2", "rack": None},
    ]
    # by id, then by instance id
    assert member_racks(g, registered, rules) == MemberRacks({"m-1": "az-c", "m-2": None})


def java_group(*members: tuple[str, str | None]) -> RealGroup:
    """Kafka member ids as a classic Java consumer gets them: ``<client.id>-<uuid>``."""
    return RealGroup(
        "payments",
        "STABLE",
        tuple(
            RealMember(f"{cid}-1d9b{i}", cid, "10.9.9.9", inst, (("orders", i),))
            for i, (cid, inst) in enumerate(members)
        ),
    )


def test_a_java_member_is_matched_by_its_client_id_not_left_rackless() -> None:
    # Issue 24: RackplanConsumer with rackplan.member.id (no group.instance.id) joins as "j-az-a-1d9b...";
    # its registration says "j-az-a". The member's rack is the registered one, found by client.id.
    g = java_group(("j-az-a", None), ("j-az-b", None))
    registered = [{"member_id": "j-az-a", "rack": "az-a"}, {"member_id": "j-az-b", "rack": "az-b"}]
    assert member_racks(g, registered, ()) == MemberRacks({"j-az-a-1d9b0": "az-a", "j-az-b-1d9b1": "az-b"})


def test_a_member_nobody_can_place_is_unknown_not_rackless() -> None:
    g = java_group(("j-az-a", None), ("stranger", None))
    registered = [{"member_id": "j-az-a", "rack": "az-a"}]
    assert member_racks(g, registered, ()) == MemberRacks({"j-az-a-1d9b0": "az-a"}, ("stranger-1d9b1",))
    # a rule that places it: known
    rules = (RackRule(rack="az-c", client_id="strang*"),)
    assert member_racks(g, registered, rules).unknown == ()


def test_a_shared_client_id_matches_nobody() -> None:
    # Two live members with the same client.id cannot be told apart: both unknown, never guessed.
    g = java_group(("app", None), ("app", None))
    assert member_racks(g, [{"member_id": "app", "rack": "az-a"}], ()).unknown == ("app-1d9b0", "app-1d9b1")


def test_static_members_match_by_instance_id_even_when_registered_under_it_as_member_id() -> None:
    # Python followers and KIP-848 Java members register their group.instance.id as their member id.
    g = java_group(("c1", "f-1"), ("c2", "f-2"))
    registered = [
        {"member_id": "f-1", "rack": "az-a"},
        {"member_id": "x", "group_instance_id": "f-2", "rack": "az-b"},
    ]
    assert member_racks(g, registered, ()) == MemberRacks({"c1-1d9b0": "az-a", "c2-1d9b1": "az-b"})


def describer(admin: FakeAdmin, clock: list[float], **kw: Any) -> tuple[GroupDescriber, Metrics, io.StringIO]:
    buf = io.StringIO()
    configure("json", "info", stream=buf)
    m = Metrics()
    d = GroupDescriber(
        admin,
        MembershipSettings(**kw),
        m,
        get_logger("t"),
        request_timeout_s=1,
        batch_size=2,
        clock=lambda: clock[0],
    )
    return d, m, buf


def test_described_in_batches() -> None:
    admin = FakeAdmin({}, {"a": Desc("a", []), "b": desc(), "c": Desc("c", [], State("DEAD"))})
    d, _, _ = describer(admin, [0.0])
    out = d.describe(["c", "b", "a", "b"])
    assert admin.groups_described == [["a", "b"], ["c"]]
    assert out["b"] == real_group(desc()) and out["c"] == RealGroup("c", "DEAD", ())


def test_unsupported_brokers_degrade_with_a_logged_reason_and_retry_later() -> None:
    clock = [0.0]
    groups: dict[str, Any] = {"a": failed(KafkaError._UNSUPPORTED_FEATURE), "b": desc()}
    admin = FakeAdmin({}, groups)
    d, m, buf = describer(admin, clock, retry_unsupported_s=600)
    assert d.describe(["a", "b"]) == {}
    assert not d.enabled and d.unsupported is not None and "_UNSUPPORTED_FEATURE" in d.unsupported
    assert d.describe(["a", "b"]) == {} and len(admin.groups_described) == 1  # not asked again meanwhile
    logs = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert len(logs) == 1 and logs[0]["level"] == "warning" and "not supported" in logs[0]["event"]
    assert m.get("rackplan_describe_groups_failures_total", {"reason": "unsupported"}) == 1
    clock[0] = 601.0
    groups["a"] = Desc("a", [])  # the admin's own mapping
    assert set(d.describe(["a", "b"])) == {"a", "b"} and d.enabled


def test_a_failing_group_does_not_hide_the_others() -> None:
    admin = FakeAdmin({}, {"a": failed(KafkaError.GROUP_AUTHORIZATION_FAILED), "b": desc()})
    d, m, buf = describer(admin, [0.0])
    assert set(d.describe(["a", "b"])) == {"b"}
    assert set(d.describe(["a", "b"])) == {"b"}
    assert m.get("rackplan_describe_groups_failures_total", {"reason": "GROUP_AUTHORIZATION_FAILED"}) == 2
    assert len(buf.getvalue().splitlines()) == 1  # logged once per distinct reason
    assert d.enabled


def test_switched_off() -> None:
    admin = FakeAdmin({}, {"a": desc()})
    d, _, _ = describer(admin, [0.0], describe_groups=False)
    assert d.describe(["a"]) == {} and admin.groups_described == []
