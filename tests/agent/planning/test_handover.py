"""Two-phase handovers: the pure split (property-tested) and the loop that publishes both phases."""

from __future__ import annotations

import io
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.agent.follower.releases import Seen, withheld
from rackplan.agent.groups.registry import decode_registration
from rackplan.agent.planning.handover import (
    departed,
    holders,
    pending_from,
    split,
    still_unreleased,
    with_unreleased,
)
from rackplan.agent.protocol.plans import decode_record
from rackplan.agent.protocol.registrations import FollowerStatus, registration_key
from rackplan.agent.runtime.loop import Agent
from rackplan.agent.testing import FakeAdmin, FakePublisher
from tests.agent.cycle.test_run import cycle, make_agent

TP = tuple[str, int]
PARTS = [("t", p) for p in range(8)]
MEMBERS = ["a", "b", "c", "d"]
Scenario = tuple[dict[str, list[TP]], dict[str, Any], dict[str, FollowerStatus], dict[str, list[TP]]]


@st.composite
def scenarios(draw: Any) -> Scenario:
    """A target assignment, the plan of record before it, the live followers, and what some of them may
    still hold besides (listed unreleased by the plan of record and not confirmed)."""
    new_members = draw(st.lists(st.sampled_from(MEMBERS), min_size=1, max_size=4, unique=True))
    old_members = draw(st.lists(st.sampled_from(MEMBERS), min_size=0, max_size=4, unique=True))
    target: dict[str, list[TP]] = {m: [] for m in sorted(new_members)}
    old: dict[str, list[list[Any]]] = {m: [] for m in sorted(old_members)}
    for tp in PARTS:
        target[draw(st.sampled_from(sorted(new_members)))].append(tp)
        if old_members and draw(st.booleans()):
            old[draw(st.sampled_from(sorted(old_members)))].append(list(tp))
    modes = st.sampled_from(["waiting", "plan", "plan", "plan", "subscription"])
    followers = {
        m: FollowerStatus(released_generation=draw(st.integers(0, 3)), mode=draw(modes))
        for m in draw(st.lists(st.sampled_from(MEMBERS), max_size=4, unique=True))
    }
    lingering = {
        m: draw(st.lists(st.sampled_from(PARTS), max_size=3, unique=True))
        for m in draw(st.lists(st.sampled_from(sorted(followers) or MEMBERS), max_size=2, unique=True))
        if m in followers
    }
    return target, {"group_id": "g", "assignment": old, "revoked": {}}, followers, lingering


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_the_revoking_phase_never_gives_a_partition_a_live_follower_may_hold(case: Scenario) -> None:
    target, last, followers, lingering = case
    s = split(target, last, followers, lingering)
    may_hold: dict[TP, set[str]] = {tp: {o} for tp, o in holders(last).items()}
    for m, parts in lingering.items():
        for tp in parts:
            may_hold.setdefault(tp, set()).add(m)
    moving = {
        tp: olds
        for m, parts in target.items()
        for tp in parts
        if (olds := (may_hold.get(tp, set()) - {m}) & followers.keys())
    }
    subscribed = any(f.mode == "subscription" for f in followers.values())
    if s is None:
        assert not moving and not subscribed, "single phase only when no live follower gives anything up"
        return
    given_out = {tp: m for m, parts in s.assignment.items() for tp in parts}
    assert set(s.assignment) == set(target)
    for m, parts in s.assignment.items():
        assert set(parts) <= set(target[m]), "the first phase is part of the target"
    for tp, m in given_out.items():
        assert not (may_hold.get(tp, set()) - {m}) & followers.keys(), (
            "never what another live follower holds"
        )
    revoked = {(o, tp) for o, parts in s.revoked.items() for tp in parts}
    if subscribed:
        assert given_out == {}, "followers in group subscription may hold anything: nothing is given"
    else:
        assert set(given_out) | set(moving) == {tp for parts in target.values() for tp in parts}
        assert revoked == {(o, tp) for tp, olds in moving.items() for o in olds}
    assert all(o in may_hold.get(tp, set()) for o, tp in revoked), "only what a member may hold is revoked"
    assert set(s.awaiting) >= set(s.revoked)
    assert all(m in followers for m in s.awaiting)


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_departed_lists_every_partition_a_holder_that_left_may_still_read(case: Scenario) -> None:
    target, last, followers, _ = case
    carried = {m: PARTS[:3] for m in MEMBERS[::2] if m not in followers}  # listed by the plan of record
    gone = departed(target, last, followers, carried)
    owners = holders(last)
    expected = {
        (old, tp)
        for m, parts in target.items()
        for tp in parts
        for old in {owners.get(tp), *(c for c, cparts in carried.items() if tp in cparts)}
        if old is not None and old != m and old not in followers
    }
    assert {(o, tp) for o, parts in gone.items() for tp in parts} == expected
    assert all(parts == sorted(parts) for parts in gone.values())


def test_holders_counts_revoked_partitions_as_held() -> None:
    body = {"assignment": {"a": [["t", 0]]}, "revoked": {"b": [["t", 1]], "a": [["t", 0]]}}
    assert holders(body) == {("t", 0): "a", ("t", 1): "b"}
    assert holders({"assignment": {"a": [["t"], "x", ["t", True]]}}) == {}


def test_pending_outstanding_and_resume() -> None:
    rec = decode_record(
        "consumer/g",
        json.dumps(
            {
                "schema": 1,
                "generation": 4,
                "state": "revoking",
                "consumer_group": {"group_id": "g", "assignment": {"a": []}, "revoked": {"b": [["t", 0]]}},
                "stats": {},
                "handover": {
                    "awaiting": ["b"],
                    "target": {
                        "consumer_group": {"group_id": "g", "assignment": {"a": [["t", 0]]}, "revoked": {}},
                        "stats": {"moved": 1},
                    },
                },
            }
        ).encode(),
    )
    p = pending_from(rec, now=5.0)
    assert p is not None and p.awaiting == ("b",) and p.started == 5.0
    assert p.outstanding({"b": FollowerStatus(3, "plan")}) == ["b"]
    assert p.outstanding({"b": FollowerStatus(4, "subscription")}) == ["b"]
    assert p.outstanding({"b": FollowerStatus(4, "plan")}) == []
    assert p.outstanding({}) == [], "a follower that left holds nothing"
    final = p.target(5, "2026-01-01T00:00:00Z", [])
    assert final.state == "proposed" and final.generation == 5
    assert final.body["assignment"] == {"a": [["t", 0]]}
    assert final.handover == {"from_generation": 4, "timed_out": []}
    assert rec is not None
    # The revoking plan also listed what a holder that had left (c) may still read: the target lists it
    # again, next to what a timed-out follower (b) did not release.
    gone = with_unreleased(rec, {"c": [("t", 1)]})
    assert gone.handover is not None and gone.handover["awaiting"] == ["b"] and "target" in gone.handover
    assert gone.handover["from_generation"] == 4
    final = pending_from(gone, now=5.0).target(5, "2026-01-01T00:00:00Z", ["b"])  # type: ignore[union-attr]
    unreleased = {"b": [["t", 0]], "c": [["t", 1]]}
    assert final.handover == {"from_generation": 4, "timed_out": ["b"], "unreleased": unreleased}
    assert with_unreleased(rec, {"c": []}) is rec, "nothing listed: the record as it was"
    broken = rec.__class__(**{**{f: getattr(rec, f) for f in rec.__dataclass_fields__}, "handover": {"x": 1}})
    assert pending_from(broken, 0.0) is None, "a revoking record without its target is not resumed"
    assert pending_from(None, 0.0) is None


# ---- the loop, with fake clients -----------------------------------------------------------------


def follow(agent: Any, mid: str, rack: str, released: int = 0, mode: str = "plan", **extra: Any) -> None:
    """A follower's registration record, as the loop reads it from the topic."""
    value = {
        "schema": 1,
        "group_id": "g",
        "member_id": mid,
        "rack": rack,
        "topics": ["t"],
        "assignor": "range",
        "follower": True,
        "released_generation": released,
        "mode": mode,
        **extra,
    }
    key = registration_key("consumer", "g", mid)
    now_ms = int(agent.tick[0] * 1000)
    agent.term.store.apply(key, decode_registration(key, json.dumps(value).encode(), now_ms), now_ms)


def plans(pub: Any) -> list[tuple[int, str]]:
    return [(v["generation"], v["state"]) for k, v in pub.on("_rackplan.plans") if k == "consumer/g" and v]


def test_a_follower_group_hands_over_in_two_phases() -> None:
    admin = FakeAdmin({"t": [[1], [1], [2], [2], [3], [3]]})
    agent, pub, _ = make_agent(admin, [], registrations={"ttl_s": 120}, followers={"release_timeout_s": 60})
    follow(agent, "a", "az-a")
    follow(agent, "b", "az-b")
    r = cycle(agent)
    assert [(p.generation, p.state) for p in r.published] == [(1, "proposed")], "nobody held anything"
    follow(agent, "c", "az-c", released=0)
    r = cycle(agent)
    (rev,) = r.published
    assert (rev.generation, rev.state) == (2, "revoking")
    assert rev.body["revoked"] and set(rev.handover["awaiting"]) == set(rev.body["revoked"])  # type: ignore[index]
    assert rev.body["assignment"]["c"] == [], "c gets nothing while a and b still hold its partitions"
    assert agent.metrics.get("rackplan_handovers_pending") == 1
    assert cycle(agent).published == [] and plans(pub) == [(1, "proposed"), (2, "revoking")]
    for m, rack in (("a", "az-a"), ("b", "az-b")):
        follow(agent, m, rack, released=2)
    agent.serve_handovers()  # between cycles: the releases are in
    r = cycle(agent)
    (final,) = r.completed
    assert (final.generation, final.state) == (3, "proposed")
    assert final.body["assignment"]["c"] == [["t", 4], ["t", 5]], "rack-local for c"
    assert final.handover == {"from_generation": 2, "timed_out": []}
    assert plans(pub) == [(1, "proposed"), (2, "revoking"), (3, "proposed")]
    assert agent.metrics.get("rackplan_handovers_total", {"result": "completed"}) == 1
    assert cycle(agent).published == [] and cycle(agent).completed == [], "nothing more to do"


def test_a_dead_follower_does_not_block_the_handover_forever() -> None:
    admin = FakeAdmin({"t": [[1], [1], [2], [2], [3], [3]]})
    agent, _, _ = make_agent(admin, [], registrations={"ttl_s": 600}, followers={"release_timeout_s": 45})
    follow(agent, "a", "az-a")
    follow(agent, "b", "az-b")
    cycle(agent)
    follow(agent, "c", "az-c")
    assert cycle(agent).published[0].state == "revoking"
    follow(agent, "a", "az-a", released=2)  # b never answers
    assert cycle(agent, 30).completed == []
    (final,) = cycle(agent, 30).completed  # 60 s > release_timeout_s
    # What b was asked to give up, so that no follower takes it before b's registration says it let go.
    unreleased = {"b": [["t", 5]]}
    assert final.handover == {"from_generation": 2, "timed_out": ["b"], "unreleased": unreleased}
    assert agent.metrics.get("rackplan_handovers_total", {"result": "timed_out"}) == 1


def test_a_follower_that_left_counts_as_released() -> None:
    admin = FakeAdmin({"t": [[1], [1], [2], [2], [3], [3]]})
    agent, _, _ = make_agent(admin, [], registrations={"ttl_s": 600}, followers={"release_timeout_s": 600})
    follow(agent, "a", "az-a")
    follow(agent, "b", "az-b")
    cycle(agent)
    follow(agent, "c", "az-c")
    cycle(agent)
    follow(agent, "a", "az-a", released=2)
    agent.term.store.apply(registration_key("consumer", "g", "b"), None, 0)  # b unregistered (closed)
    r = cycle(agent)
    assert [p.state for p in r.completed] == ["proposed"]
    assert r.published and r.published[0].state == "proposed", "then re-planned without b, single phase"


def test_groups_without_followers_keep_single_phase_plans() -> None:
    from tests.agent.cycle.test_run import register

    admin = FakeAdmin({"t": [[1], [1], [2], [2], [3], [3]]})
    agent, _, _ = make_agent(admin, [], registrations={"ttl_s": 600})
    register(agent, "g", "a", "az-a", assignor="range")
    register(agent, "g", "b", "az-b")
    cycle(agent)
    register(agent, "g", "c", "az-c")
    assert [(p.generation, p.state) for p in cycle(agent).published] == [(2, "proposed")]
    assert dict(agent.term.handovers()) == {}


def taken_over_mid_handover(unread: str | None = None) -> tuple[Any, Any]:
    """a and b hold everything, c joins: revoking plan 2 awaits a and b.  Then another agent takes over: the
    plan topic replayed, the registrations too (``unread``: that member's record not read yet).  The new
    agent and its publisher."""
    admin = FakeAdmin({"t": [[1], [1], [2], [2], [3], [3]]})
    agent, pub, _ = make_agent(admin, [], registrations={"ttl_s": 600}, followers={"release_timeout_s": 600})
    follow(agent, "a", "az-a")
    follow(agent, "b", "az-b")
    cycle(agent)
    follow(agent, "c", "az-c")
    cycle(agent)
    records = [(k, decode_record(k, json.dumps(v).encode())) for k, v in pub.on("_rackplan.plans")]
    other, pub2, _ = make_agent(admin, [], registrations={"ttl_s": 600}, followers={"release_timeout_s": 600})
    other._new_term()
    for e in agent.term.store.entries():
        if unread is None or e.key != registration_key("consumer", "g", unread):
            other.term.store.apply(e.key, e, int(other.tick[0] * 1000))  # type: ignore[attr-defined]
    other.begin(records)
    return other, pub2


def test_a_takeover_resumes_the_handover_and_does_not_start_another() -> None:
    other, pub2 = taken_over_mid_handover()
    assert (
        list(dict(other.term.handovers())) == ["consumer/g"]
        and dict(other.term.handovers())["consumer/g"].generation == 2
    )
    r = cycle(other)
    assert r.published == [] and r.completed == [], "waits for the releases; starts nothing new"
    follow(other, "a", "az-a", released=2)
    follow(other, "b", "az-b", released=2)
    (final,) = cycle(other).completed
    assert (final.generation, final.state) == (3, "proposed")
    assert [(v["generation"], v["state"]) for _, v in pub2.on("_rackplan.plans")] == [(3, "proposed")]


def test_followers_in_group_subscription_are_brought_back_with_an_empty_first_phase() -> None:
    admin = FakeAdmin({"t": [[1], [1], [2], [2], [3], [3]]})
    agent, _, _ = make_agent(admin, [], registrations={"ttl_s": 600}, followers={"release_timeout_s": 10})
    follow(agent, "a", "az-a")
    follow(agent, "b", "az-b")
    cycle(agent)
    follow(agent, "a", "az-a", released=1, mode="subscription")  # fell back while the agent was away
    follow(agent, "b", "az-b", released=1, mode="subscription")
    (rev,) = cycle(agent).published
    assert rev.state == "revoking" and rev.reason == "followers rejoin the plan after group subscription"
    assert rev.body["assignment"] == {"a": [], "b": []} and rev.handover["awaiting"] == ["a", "b"]  # type: ignore[index]
    follow(agent, "a", "az-a", released=2, mode="plan")
    follow(agent, "b", "az-b", released=2, mode="plan")
    (final,) = cycle(agent).completed
    assert final.generation == 3 and sum(len(v) for v in final.body["assignment"].values()) == 6
    # Followers that cannot come back are not asked again every cycle.
    follow(agent, "a", "az-a", released=3, mode="subscription")
    assert [p.state for p in cycle(agent, 1).published] == ["revoking"]
    follow(agent, "a", "az-a", released=4, mode="plan")
    follow(agent, "b", "az-b", released=4, mode="plan")
    cycle(agent, 1)
    follow(agent, "a", "az-a", released=5, mode="subscription")
    assert cycle(agent, 1).published == [], "at most one rejoin per 2 x release_timeout_s"
    assert [p.state for p in cycle(agent, 20).published] == ["revoking"]


def test_after_a_tombstone_the_last_plan_still_says_who_may_hold_what() -> None:
    """Every registration expired (say, the registrations topic was unreachable): the group was tombstoned,
    but its followers may still hold their partitions when they register again."""
    admin = FakeAdmin({"t": [[1], [1], [2], [2], [3], [3]]})
    agent, _, _ = make_agent(admin, [], registrations={"ttl_s": 60}, followers={"release_timeout_s": 600})
    follow(agent, "a", "az-a")
    follow(agent, "b", "az-b")
    cycle(agent)
    r = cycle(agent, 61)  # both expired: unregistered, tombstoned
    assert r.tombstoned == ["consumer/g"]
    follow(agent, "a", "az-a", released=1)
    follow(agent, "c", "az-c", released=0)  # b is gone; c is new: c must not take what b may still hold
    r = cycle(agent)
    (rev,) = r.published
    assert rev.generation == 2 and rev.state == "revoking"
    assert "b" not in rev.handover["awaiting"], "b left: nothing to wait for"  # type: ignore[index]
    assert set(rev.body["revoked"]) <= {"a"}


def test_a_plan_without_an_expired_holder_lists_its_partitions_until_it_confirms() -> None:
    """Found by the chaos scenario on real Kafka: a follower self-fenced through a broker restart, the agent
    expired it and gave its partitions to the others in one phase, and the follower, confirmed again, re-took
    them from its cached plan before that plan reached it: both read them for 50 ms.  The plan now lists an
    expired holder's partitions as unreleased, so takers wait for its registration; and while it has not
    confirmed that plan, the next plan counts it among their holders."""
    admin = FakeAdmin({"t": [[1], [1], [2], [2], [3], [3]]})
    agent, _, _ = make_agent(admin, [], registrations={"ttl_s": 20}, followers={"release_timeout_s": 60})
    follow(agent, "a", "az-a")
    follow(agent, "b", "az-b")
    follow(agent, "c", "az-c")
    (first,) = cycle(agent, 1).published
    a_held = first.body["assignment"]["a"]
    assert first.handover is None and a_held, "nobody held anything: a plain plan"
    for m, rack in (("a", "az-a"), ("b", "az-b"), ("c", "az-c")):
        follow(agent, m, rack, released=1)
    cycle(agent, 15)
    follow(agent, "b", "az-b", released=1)  # a's refreshes go unconfirmed: it expires, b and c do not
    follow(agent, "c", "az-c", released=1)
    (without_a,) = cycle(agent, 10).published
    assert without_a.state == "proposed" and "a" not in without_a.body["assignment"], "a left: one phase"
    assert without_a.handover == {"from_generation": 2, "timed_out": [], "unreleased": {"a": a_held}}
    # a's refresh lands now: it still says plan 1 (it may have re-taken what plan 1 gave it)
    follow(agent, "a", "az-a", released=1)
    follow(agent, "b", "az-b", released=2)
    follow(agent, "c", "az-c", released=2)
    (back,) = cycle(agent, 1).published
    assert back.state == "revoking", "b and c hold what a gets back: they give it up first"
    given = {tuple(tp) for parts in back.body["assignment"].values() for tp in parts}
    assert not given & {tuple(tp) for tp in a_held}, "nothing a or its takers may read is given yet"


def test_a_holder_that_has_not_confirmed_is_waited_for_like_an_assignee() -> None:
    """The plan of record lists a's partition 0 as unreleased (a is back and has not confirmed it): a plan
    that gives partition 0 to c first revokes it from both b (its assignee) and a."""
    last = {"group_id": "g", "assignment": {"b": [["t", 0]], "c": [["t", 1]]}, "revoked": {}}
    handover = {"from_generation": 5, "timed_out": [], "unreleased": {"a": [["t", 0]]}}
    live = {m: FollowerStatus(released_generation=5, mode="plan") for m in "bc"}
    live["a"] = FollowerStatus(released_generation=4, mode="plan")
    lingering = still_unreleased(handover, live)
    assert lingering == {"a": [("t", 0)]}
    s = split({"a": [], "b": [], "c": [("t", 0), ("t", 1)]}, last, live, lingering)
    assert s is not None and s.revoked == {"a": [("t", 0)], "b": [("t", 0)]}
    assert s.assignment == {"a": [], "b": [], "c": [("t", 1)]} and s.awaiting == ("a", "b")
    live["a"] = FollowerStatus(
        released_generation=5, mode="plan"
    )  # a confirmed plan 5: it holds nothing of it
    assert still_unreleased(handover, live) == {}
    assert departed({"b": [("t", 0)]}, last, {"b": live["b"]}) == {}, "b keeps it"
    assert departed({"b": [("t", 0), ("t", 1)]}, last, {"b": live["b"]}) == {"c": [("t", 1)]}, "c left"


def test_a_plan_made_before_an_expired_holder_is_read_again_lists_its_partitions_again() -> None:
    """The agent may plan again before it reads the refresh of a holder it expired (here: a member joins):
    that plan lists the holder's partitions again, while the plan that listed them is younger than the TTL."""
    admin = FakeAdmin({"t": [[1], [1], [2], [2], [3], [3]]})
    agent, _, _ = make_agent(admin, [], registrations={"ttl_s": 20}, followers={"release_timeout_s": 60})
    for m, rack in (("a", "az-a"), ("b", "az-b"), ("c", "az-c")):
        follow(agent, m, rack)
    (first,) = cycle(agent, 1).published
    a_held = first.body["assignment"]["a"]
    cycle(agent, 15)
    for m, rack in (("b", "az-b"), ("c", "az-c")):
        follow(agent, m, rack, released=1)
    (without_a,) = cycle(agent, 10).published
    assert without_a.handover == {"from_generation": 2, "timed_out": [], "unreleased": {"a": a_held}}
    for m, rack in (("b", "az-b"), ("c", "az-c")):
        follow(agent, m, rack, released=2)
    follow(agent, "d", "az-c")  # a new member; a's refresh, if any, is not read yet
    (with_d,) = cycle(agent, 1).published
    assert with_d.handover is not None and with_d.handover["unreleased"] == {"a": a_held}
    assert with_d.handover["from_generation"] == with_d.generation


def test_an_expired_holder_is_not_listed_again_once_the_plan_that_listed_it_is_older_than_the_ttl() -> None:
    admin = FakeAdmin({"t": [[1], [1], [2], [2], [3], [3]]})
    agent, _, _ = make_agent(admin, [], registrations={"ttl_s": 20}, followers={"release_timeout_s": 60})
    for m, rack in (("a", "az-a"), ("b", "az-b"), ("c", "az-c")):
        follow(agent, m, rack)
    cycle(agent, 1)
    cycle(agent, 15)
    for m, rack in (("b", "az-b"), ("c", "az-c")):
        follow(agent, m, rack, released=1)
    (without_a,) = cycle(agent, 10).published
    assert without_a.handover is not None and "a" in without_a.handover["unreleased"]
    cycle(agent, 15)
    for m, rack in (("b", "az-b"), ("c", "az-c")):
        follow(agent, m, rack, released=2)
    follow(agent, "d", "az-c")
    (with_d,) = cycle(agent, 10).published  # 25 s after the plan that listed a
    assert "a" not in ((with_d.handover or {}).get("unreleased") or {}), "a is gone: nothing to list"


def a_and_b_on_plan_1(admin: FakeAdmin, ttl_s: float) -> tuple[Agent, FakePublisher, io.StringIO]:
    """Followers a (az-a) and b (az-b) have applied plan 1 (release timeout 600 s): make_agent's triple."""
    made = make_agent(admin, [], registrations={"ttl_s": ttl_s}, followers={"release_timeout_s": 600})
    agent = made[0]
    follow(agent, "a", "az-a")
    follow(agent, "b", "az-b")
    cycle(agent, 1)
    follow(agent, "a", "az-a", released=1)
    follow(agent, "b", "az-b", released=1)
    return made


def test_an_awaited_follower_that_expires_mid_handover_is_listed_as_unreleased() -> None:
    """Found by a hunt: b, asked to give t5 up, went silent (fenced through an outage) until its registration
    expired; the target then gave t5 to c with nothing listed, and b, back on its cached plan, read it too."""
    agent, _, _ = a_and_b_on_plan_1(FakeAdmin({"t": [[1], [1], [2], [2], [3], [3]]}), ttl_s=120)
    follow(agent, "c", "az-c")
    (rev,) = cycle(agent, 1).published
    assert rev.state == "revoking" and rev.body["revoked"]["b"] == [["t", 5]]
    completed = []
    for _ in range(5):  # b silent for 150 s > the TTL; a and c confirm and refresh
        follow(agent, "a", "az-a", released=rev.generation)
        follow(agent, "c", "az-c", released=rev.generation)
        completed += cycle(agent, 30).completed
    (final,) = completed
    assert final.body["assignment"]["c"] == [["t", 4], ["t", 5]]
    assert final.handover is not None and final.handover["unreleased"] == {"b": [["t", 5]]}
    assert final.handover["timed_out"] == [], "b did not time out: it left"
    assert withheld(final.handover, "c", {"b": Seen(FollowerStatus(1, "plan"), 0)}, 0, 120_000) == {
        "b": [("t", 5)]
    }, "b, back on generation 1, still holds t5 for c"


def test_a_takeover_that_has_not_read_an_awaited_follower_lists_its_partitions() -> None:
    """Found by a hunt: the new leader's registrations read stopped short of b's record (its partition's
    leader away), so b counted as gone and the resumed target gave t5 to c; t5 is now listed for b."""
    other, _ = taken_over_mid_handover(unread="b")
    follow(other, "a", "az-a", released=2)
    (final,) = cycle(other).completed
    assert final.body["assignment"]["c"] == [["t", 4], ["t", 5]]
    assert final.handover is not None and final.handover["unreleased"] == {"b": [["t", 5]]}


def test_when_every_follower_expired_the_plan_still_lists_what_they_may_read() -> None:
    """Found by a hunt: a group of the settings file whose followers all expired (an outage) got plans in one
    phase with nothing listed; both came back on their cached plan and swapped partitions unwithheld."""
    from tests.agent.cycle.test_run import group

    admin = FakeAdmin({"t": [[1], [1], [2], [2]]})
    agent, _, _ = make_agent(
        admin, [group("g")], registrations={"ttl_s": 20}, followers={"release_timeout_s": 60}
    )
    follow(agent, "g-a", "az-a")
    follow(agent, "g-b", "az-b")
    (first,) = cycle(agent, 1).published
    assert first.body["assignment"] == {"g-a": [["t", 0], ["t", 1]], "g-b": [["t", 2], ["t", 3]]}
    cycle(agent, 25)  # neither refreshes: both expire
    assert agent.term.store.followers("consumer", "g") == {}
    admin.topics["t"][0] = [2]
    (second,) = cycle(agent, 1).published
    moved = {
        m: [tp for tp in parts if tp not in first.body["assignment"][m]]
        for m, parts in second.body["assignment"].items()
    }
    assert any(moved.values()), "the move hands partitions between the two"
    assert second.handover is not None
    listed = second.handover["unreleased"]
    for m, parts in moved.items():
        other = "g-b" if m == "g-a" else "g-a"
        assert set(map(tuple, parts)) <= set(map(tuple, listed.get(other, []))), (m, listed)


def test_a_plan_whose_delivery_is_uncertain_counts_its_assignees_as_holders() -> None:
    """Found by a hunt: plan 2 gave the new partition t4 to a; its publish timed out but it landed, and a
    took t4.  Before the agent read it back, t4 moved to az-b: plan 3 gave it to b in one phase."""
    from rackplan.agent.kafka.exceptions import DeliveryUncertain

    admin = FakeAdmin({"t": [[1], [1], [2], [2]]})
    agent, pub, _ = a_and_b_on_plan_1(admin, ttl_s=600)
    landed_but_unconfirmed = pub.publish_each

    def uncertain(topic: str, records: list[tuple[str, bytes | None]], timeout_s: float) -> list[Any]:
        landed_but_unconfirmed(topic, records, timeout_s)
        return [DeliveryUncertain("no delivery report in time") for _ in records]

    pub.publish_each = uncertain  # type: ignore[method-assign]
    admin.topics["t"].append([1])  # t4, in az-a
    assert cycle(agent, 1).published == []
    (doubted,) = [v for k, v in pub.on("_rackplan.plans") if v and v["generation"] == 2]
    assert doubted["consumer_group"]["assignment"]["a"][-1] == ["t", 4]
    pub.publish_each = landed_but_unconfirmed  # type: ignore[method-assign]
    follow(agent, "a", "az-a", released=2)  # a applied plan 2: it reads t4
    follow(agent, "b", "az-b", released=2)
    admin.topics["t"][4] = [2]  # t4 moves to az-b
    (nxt,) = cycle(agent, 1).published
    assert nxt.state == "revoking" and ["t", 4] in nxt.body["revoked"]["a"], "a gives t4 up first"
    assert ["t", 4] not in nxt.body["assignment"]["b"]
