"""Live members of a classic Kafka Streams group matched to their registered clients (issue 24: the live
judgement of Streams apps): by the stream thread consumer's client.id, else the rack rules, else unknown."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rackplan.agent.groups.membership import RealGroup, RealMember
from rackplan.agent.groups.streams_members import match_clients, streams_client_id, streams_member_racks
from rackplan.agent.settings.sections import RackRule

APP = "clicks"
CLIENTS = [{"process_id": "p-a", "rack": "az-a"}, {"process_id": "4f1c-uuid", "rack": "az-b"}]


def member(mid: str, client_id: str, host: str = "10.0.9.9") -> RealMember:
    return RealMember(mid, client_id, host, None, (("t", 0),))


def test_a_thread_consumers_client_id_names_its_streams_client() -> None:
    assert streams_client_id("p-a-StreamThread-1-consumer") == "p-a"
    assert streams_client_id("clicks-4f1c-uuid-StreamThread-12-consumer") == "clicks-4f1c-uuid"
    # Not a stream thread's main consumer (a restore consumer is no group member): the id as it is.
    assert streams_client_id("p-a-StreamThread-1-restore-consumer") == "p-a-StreamThread-1-restore-consumer"
    assert streams_client_id("plain") == "plain"


@given(
    client=st.text(st.characters(codec="ascii", exclude_characters="\n"), min_size=1, max_size=20),
    thread=st.integers(1, 999),
)
def test_the_streams_client_id_is_recovered_whatever_it_is(client: str, thread: int) -> None:
    # Kafka Streams builds "<client id>-StreamThread-<n>-consumer" (ClientUtils.getConsumerClientId).
    assert streams_client_id(f"{client}-StreamThread-{thread}-consumer") == client


def test_every_thread_of_a_client_gets_its_rack_by_process_id_or_kafkas_default_client_id() -> None:
    group = RealGroup(
        APP,
        "STABLE",
        (
            member("m1", "p-a-StreamThread-1-consumer"),  # client.id set to the process id
            member("m2", "p-a-StreamThread-2-consumer"),  # a second thread of the same client
            member("m3", "clicks-4f1c-uuid-StreamThread-1-consumer"),  # Kafka's default <app>-<process id>
        ),
    )
    matched, pending = match_clients(group, APP, CLIENTS)
    assert {m: c["process_id"] for m, c in matched.items()} == {"m1": "p-a", "m2": "p-a", "m3": "4f1c-uuid"}
    assert pending == []
    mr = streams_member_racks(group, APP, CLIENTS, ())
    assert dict(mr.racks) == {"m1": "az-a", "m2": "az-a", "m3": "az-b"} and mr.unknown == ()


def test_an_unmatched_member_is_placed_by_the_rules_or_else_unknown_never_local() -> None:
    group = RealGroup(
        APP,
        "STABLE",
        (
            member("m1", "web-1-StreamThread-1-consumer", host="10.0.2.7"),  # its own client.id: no match
            member("m2", "other-app-p-a-StreamThread-1-consumer"),  # another app's prefix: not p-a
            member("m3", "p-az-StreamThread-1-consumer"),  # a near miss is no match
        ),
    )
    rules = (RackRule(rack="az-c", host="10.0.2.0/24"),)
    mr = streams_member_racks(group, APP, CLIENTS, rules)
    assert dict(mr.racks) == {"m1": "az-c"}
    assert mr.unknown == ("m2", "m3")


# ---- the registration's thread consumers (issue 24: apps that set their own client.id) ----------------

UUID_A, UUID_B = "5b0e2a34-8c1f-4d2e-9a7b-0c1d2e3f4a5b", "9f8e7d6c-5b4a-4321-8fed-cba987654321"
#: registered by RackplanTaskAssignor: process ids are Streams' UUIDs, the app's client.id is "web-<n>"
JAVA_CLIENTS: list[dict[str, Any]] = [
    {
        "process_id": UUID_A,
        "rack": "az-a",
        "consumer_client_ids": ["web-1-StreamThread-1-consumer-m1", "web-1-StreamThread-2-consumer-m2"],
    },
    {"process_id": UUID_B, "rack": "az-b", "consumer_client_ids": ["web-2-StreamThread-1-consumer"]},
]


def test_an_app_with_its_own_client_id_is_matched_by_its_registered_thread_consumers() -> None:
    group = RealGroup(
        APP,
        "STABLE",
        (
            # the classic protocol's member id (<client.id>-<uuid>) as the leader's Streams saw it
            RealMember("web-1-StreamThread-1-consumer-m1", "web-1-StreamThread-1-consumer", "h", None, ()),
            RealMember("web-1-StreamThread-2-consumer-m2", "web-1-StreamThread-2-consumer", "h", None, ()),
            # a registration that names the thread consumer's client.id itself
            RealMember("web-2-StreamThread-1-consumer-m3", "web-2-StreamThread-1-consumer", "h", None, ()),
            # a thread the registration does not name (it joined after the leader's last assignment)
            RealMember("web-1-StreamThread-3-consumer-m4", "web-1-StreamThread-3-consumer", "h", None, ()),
        ),
    )
    mr = streams_member_racks(group, APP, JAVA_CLIENTS, ())
    assert dict(mr.racks) == {
        "web-1-StreamThread-1-consumer-m1": "az-a",
        "web-1-StreamThread-2-consumer-m2": "az-a",
        "web-2-StreamThread-1-consumer-m3": "az-b",
    }
    assert mr.unknown == ("web-1-StreamThread-3-consumer-m4",)


def test_the_registered_thread_consumers_come_first_and_an_id_two_clients_claim_names_neither() -> None:
    clients: list[dict[str, Any]] = [
        # the client.id p-a names this client by the old rule, but another client lists the member
        {"process_id": "p-a", "rack": "az-a"},
        {"process_id": UUID_B, "rack": "az-b", "consumer_client_ids": ["mid-1"]},
        # two instances sharing client.id "web": their thread consumers' client ids are the same
        {"process_id": "u-1", "rack": "az-a", "consumer_client_ids": ["web-StreamThread-1-consumer"]},
        {"process_id": "u-2", "rack": "az-c", "consumer_client_ids": ["web-StreamThread-1-consumer"]},
    ]
    group = RealGroup(
        APP,
        "STABLE",
        (member("mid-1", "p-a-StreamThread-1-consumer"), member("mid-2", "web-StreamThread-1-consumer")),
    )
    matched, pending = match_clients(group, APP, clients)
    assert {m: c["process_id"] for m, c in matched.items()} == {"mid-1": UUID_B}
    assert [m.member_id for m in pending] == ["mid-2"]
    rules = (RackRule(rack="az-c", client_id="web-*"),)
    assert dict(streams_member_racks(group, APP, clients, rules).racks) == {"mid-1": "az-b", "mid-2": "az-c"}


ids = st.text(st.sampled_from("ab-1"), min_size=1, max_size=4)


@given(
    lists=st.lists(st.lists(ids, max_size=3), min_size=1, max_size=4),
    members=st.lists(st.tuples(ids, ids), max_size=6, unique_by=lambda x: x[0]),
)
def test_a_member_is_the_one_client_that_lists_its_id(
    lists: list[list[str]], members: list[tuple[str, str]]
) -> None:
    # Oracle, by brute force over every client: a member is client i when i is the only client listing its
    # member id, else the only one listing its client id; otherwise no client (process ids match nothing).
    clients: list[dict[str, Any]] = [
        {"process_id": f"P{i}", "rack": f"r{i}", "consumer_client_ids": x} for i, x in enumerate(lists)
    ]
    group = RealGroup(APP, "STABLE", tuple(member(mid, cid) for mid, cid in members))
    matched, pending = match_clients(group, APP, clients)

    def only(name: str) -> str | None:
        owners: set[str] = {c["process_id"] for c in clients if name in c["consumer_client_ids"]}
        return owners.pop() if len(owners) == 1 else None

    want = {mid: only(mid) or only(cid) for mid, cid in members}
    assert {m: c["process_id"] for m, c in matched.items()} == {m: p for m, p in want.items() if p}
    assert [m.member_id for m in pending] == [m for m, p in want.items() if p is None]
