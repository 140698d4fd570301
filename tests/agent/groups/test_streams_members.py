"""Live members of a classic Kafka Streams group matched to their registered clients (issue 24: the live
judgement of Streams apps): by the stream thread consumer's client.id, else the rack rules, else unknown."""

from __future__ import annotations

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
