"""Snapshot diffs in rack terms, unknown racks, and the debounce that makes a change persist."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.agent.cluster.diff import (
    BROKER_RACK,
    LEADER_RACK,
    PARTITIONS_ADDED,
    PARTITIONS_REMOVED,
    REPLICA_RACKS,
    TOPIC_ADDED,
    TOPIC_REMOVED,
    Debounce,
    diff,
    hold_reassignments,
)
from rackplan.agent.cluster.metadata import NO_LEADER, Snapshot, TopicState, known_racks

RACKS = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}


def snap(topics: dict[str, list[tuple[int, ...]]], brokers: Mapping[int, str | None] | None = None,
         leaders: dict[str, list[int]] | None = None) -> Snapshot:  # fmt: skip
    leaders = leaders or {}
    return Snapshot(
        brokers=dict(RACKS if brokers is None else brokers),
        topics={
            t: TopicState(tuple(parts), tuple(leaders.get(t, [p[0] if p else NO_LEADER for p in parts])))
            for t, parts in topics.items()
        },
    )


def run(old: Snapshot, new: Snapshot):  # type: ignore[no-untyped-def]
    known = known_racks({}, old)
    old_r = old.resolve_racks(known)
    known = known_racks(known, new)
    return diff(old, new, old_r, new.resolve_racks(known))


def kinds(d) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(c.kind, c.label()) for c in d.changes]


def test_identical_snapshots_have_no_changes() -> None:
    s = snap({"t": [(1, 3), (3, 5)]})
    d = run(s, snap({"t": [(1, 3), (3, 5)]}))
    assert d.empty and d.touched_topics == frozenset() and d.reason() == ""


def test_reassignment_within_a_rack_changes_nothing() -> None:
    # 1 -> 2 and 3 -> 4 stay in racks a and b; the leader moves from 1 to 2, still rack a
    d = run(snap({"t": [(1, 3)]}), snap({"t": [(2, 4)]}))
    assert d.empty


def test_rack_set_change_is_reported_per_partition() -> None:
    d = run(snap({"t": [(1, 3), (1, 3)]}), snap({"t": [(1, 3), (1, 5)]}))
    assert kinds(d) == [(REPLICA_RACKS, "t-1")]
    assert d.changes[0].before == "a,b" and d.changes[0].after == "a,c"
    assert d.touched_topics == frozenset({"t"})
    assert d.reason() == "replica racks changed: t-1"


def test_offline_replicas_still_count() -> None:
    # broker 3 goes offline: gone from the broker list, leaderless partition, still a replica
    old = snap({"t": [(3, 1)]})
    new = snap({"t": [(3, 1)]}, brokers={k: v for k, v in RACKS.items() if k != 3}, leaders={"t": [1]})
    d = run(old, new)
    assert REPLICA_RACKS not in [c.kind for c in d.changes]
    assert [c.kind for c in d.changes] == [LEADER_RACK]


def test_leaderless_partition_is_a_leader_rack_change() -> None:
    d = run(snap({"t": [(1, 3)]}), snap({"t": [(1, 3)]}, leaders={"t": [NO_LEADER]}))
    assert kinds(d) == [(LEADER_RACK, "t-0")]
    assert d.changes[0].after == "-"


def test_leader_changes_can_be_left_out_of_a_reason() -> None:
    d = run(snap({"t": [(1, 3)]}), snap({"t": [(1, 3)]}, leaders={"t": [3]}))
    assert d.reason() == "leader rack changed: t-0"
    assert d.reason(leaders=False) == ""


def test_topics_and_partitions_added_and_removed() -> None:
    old = snap({"gone": [(1,)], "grow": [(1,)], "shrink": [(1,), (3,)]})
    new = snap({"new": [(1,)], "grow": [(1,), (3,)], "shrink": [(1,)]})
    d = run(old, new)
    assert kinds(d) == [
        (TOPIC_REMOVED, "gone"),
        (PARTITIONS_ADDED, "grow"),
        (TOPIC_ADDED, "new"),
        (PARTITIONS_REMOVED, "shrink"),
    ]
    assert d.touched_topics == frozenset({"gone", "grow", "new", "shrink"})
    assert d.counts() == {TOPIC_ADDED: 1, TOPIC_REMOVED: 1, PARTITIONS_ADDED: 1, PARTITIONS_REMOVED: 1}


def test_broker_rack_change_touches_its_topics() -> None:
    old = snap({"t": [(1, 3)], "u": [(5,)]})
    new = snap({"t": [(1, 3)], "u": [(5,)]}, brokers={**RACKS, 3: "c"})
    d = run(old, new)
    assert kinds(d) == [(BROKER_RACK, "broker 3"), (REPLICA_RACKS, "t-0")]
    assert d.touched_topics == frozenset({"t"})


def test_broker_briefly_without_rack_is_unknown_not_a_change() -> None:
    old = snap({"t": [(1, 3)]})
    restarting = snap({"t": [(1, 3)]}, brokers={**RACKS, 3: None})
    assert run(old, restarting).empty
    # and a broker never seen with a rack contributes nothing, like the assignor's model
    s = snap({"t": [(7,)]}, brokers={**RACKS, 7: None})
    assert s.resolve_racks({})[7] is None
    assert s.to_cluster(s.resolve_racks({})).masks["t"] == (0,)


def test_reason_is_limited_and_filtered_by_topic() -> None:
    old = snap({"t": [(1,)] * 12, "u": [(1,)]})
    new = snap({"t": [(3,)] * 12, "u": [(3,)]})
    d = run(old, new)
    assert d.reason(["u"], leaders=False) == "replica racks changed: u-0"
    assert d.reason(["t"], limit=2).startswith("replica racks changed: t-0, t-1 (+10 more)")


rack_of = st.sampled_from(sorted(RACKS))


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    topics = {}
    for t in draw(st.lists(st.sampled_from("pqrs"), unique=True, max_size=4)):
        n = draw(st.integers(0, 5))
        topics[t] = [tuple(draw(st.lists(rack_of, min_size=1, max_size=3, unique=True))) for _ in range(n)]
    brokers = {b: draw(st.sampled_from(["a", "b", "c"])) for b in RACKS}
    return snap(topics, brokers=brokers)


@settings(max_examples=150, deadline=None)
@given(snapshots(), snapshots())
def test_diff_matches_brute_force(old: Snapshot, new: Snapshot) -> None:
    ro, rn = old.resolve_racks({}), new.resolve_racks({})
    d = diff(old, new, ro, rn)
    expected = set()
    for t in set(old.topics) & set(new.topics):
        a, b = old.topics[t], new.topics[t]
        for p in range(min(len(a.replicas), len(b.replicas))):
            if {ro[x] for x in a.replicas[p]} != {rn[x] for x in b.replicas[p]}:
                expected.add((t, p))
    got = {(c.topic, c.partition) for c in d.changes if c.kind == REPLICA_RACKS}
    assert got == expected
    assert diff(new, new, rn, rn).empty
    # deterministic
    assert diff(old, new, ro, rn) == d


def test_debounce_requires_persistence() -> None:
    deb: Debounce[str] = Debounce(2, lambda a, b: a == b)
    assert deb.observe(False, "x") is None
    assert deb.observe(True, "x") is None and deb.pending_polls == 1
    assert deb.observe(True, "x") == "x" and deb.pending_polls == 0


def test_debounce_resets_on_flap_and_on_a_different_change() -> None:
    deb: Debounce[str] = Debounce(2, lambda a, b: a == b)
    assert deb.observe(True, "x") is None
    assert deb.observe(False, "base") is None  # flapped back
    assert deb.observe(True, "x") is None
    assert deb.observe(True, "y") is None  # a different change starts over
    assert deb.pending_polls == 1
    assert deb.observe(True, "y") == "y"


def test_debounce_of_one_acts_at_once() -> None:
    deb: Debounce[int] = Debounce(1, lambda a, b: a == b)
    assert deb.observe(True, 5) == 5


def test_a_reassignment_in_flight_is_held_until_it_completes() -> None:
    """Kafka lists old and new replicas while it copies: that union is never acted on."""
    acted = snap({"t": [(1, 3), (1, 3)]})
    moving = Snapshot(
        brokers=dict(RACKS),
        topics={"t": TopicState(((5, 3, 1), (1, 3)), (1, 1), syncing=frozenset({0}))},
    )
    held = hold_reassignments(acted, moving)
    assert held.topics["t"].replicas == ((1, 3), (1, 3))
    assert run(acted, held).empty
    done = snap({"t": [(5, 3), (1, 3)]})
    assert hold_reassignments(acted, done) is done, "complete: nothing held"
    assert (REPLICA_RACKS, "t-0") in kinds(run(acted, done))


def test_an_offline_replica_or_a_lasting_rf_increase_is_not_held() -> None:
    acted = snap({"t": [(1, 3)]})
    # A broker down: same replicas, one out of the ISR: nothing to hold (and no rack change).
    down = Snapshot(brokers=dict(RACKS), topics={"t": TopicState(((1, 3),), (1,), syncing=frozenset({0}))})
    assert hold_reassignments(acted, down) is down
    # Replicas added and in sync: a lasting replication-factor increase is acted on.
    grown = snap({"t": [(1, 3, 5)]})
    assert hold_reassignments(acted, grown) is grown
