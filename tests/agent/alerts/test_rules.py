"""Alerts worth waking up for (issue 12): hold-downs, no flapping, unfixable once, severity, runbook, schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.agent.alerts.rules import AlertState
from rackplan.agent.protocol.alerts import (
    ALERT_SCHEMA,
    ALERTNAME,
    FIRING,
    RESOLVED,
    UNFIXABLE,
    UNFIXABLE_ALERTNAME,
    AlertEvent,
)
from rackplan.agent.protocol.plans import Locality
from rackplan.agent.settings.sections import AlertSettings
from rackplan.agent.testing import FakeAdmin
from tests.agent.cycle.test_run import cycle, discovered, group, keys, make_agent

DOCS = Path(__file__).resolve().parents[3] / "docs"


def loc(cross: int, total: int = 100) -> Locality:
    return Locality(cross, total)


def state(**kw: Any) -> AlertState:
    return AlertState(
        AlertSettings(**{"cross_rack_threshold": 0.25, "worsen_delta": 0.5, "cooldown_s": 0, **kw})
    )


def test_hold_down_before_firing_and_started_at_is_when_it_turned_bad() -> None:
    a = state(for_s=60)
    assert a.evaluate("consumer/g", loc(0), loc(40), loc(0), "racks changed", now=0) is None
    assert a.state("consumer/g") == "pending" and a.tracked() == ["consumer/g"] and a.firing() == []
    assert a.evaluate("consumer/g", loc(40), loc(40), loc(0), "", now=30) is None
    ev = a.evaluate("consumer/g", loc(40), loc(40), loc(0), "", now=60)
    assert ev is not None and (ev.status, ev.at, ev.started_at, ev.previous) == (FIRING, 60, 0, 0.0)
    assert ev.reason == "racks changed"  # the change that made it bad, not the re-evaluation's
    # A group that recovers inside the hold-down never pages.
    assert a.evaluate("consumer/h", loc(0), loc(40), loc(0), "x", now=0) is None
    assert a.evaluate("consumer/h", loc(40), loc(0), loc(0), "", now=30) is None
    assert a.evaluate("consumer/h", loc(0), loc(40), loc(0), "y", now=40) is None  # the hold-down starts over
    assert a.evaluate("consumer/h", loc(40), loc(40), loc(0), "", now=90) is None
    assert a.evaluate("consumer/h", loc(40), loc(40), loc(0), "", now=100) is not None


def test_no_flapping_a_resolve_needs_the_condition_clear_for_the_hold_down() -> None:
    a = state(for_s=0, keep_firing_for_s=60)
    assert a.evaluate("consumer/g", loc(0), loc(40), loc(0), "", now=0) is not None
    assert (
        a.evaluate("consumer/g", loc(0), loc(0), loc(0), "", now=2) is None
    )  # the "resolved 2 s later"
    assert a.evaluate("consumer/g", loc(40), loc(40), loc(0), "", now=30) is None  # bad again: clock reset
    assert a.evaluate("consumer/g", loc(0), loc(0), loc(0), "", now=40) is None
    assert a.evaluate("consumer/g", loc(0), loc(0), loc(0), "", now=99) is None
    ev = a.evaluate("consumer/g", loc(0), loc(0), loc(0), "", now=100)
    assert ev is not None and (ev.status, ev.started_at) == (RESOLVED, 0) and a.tracked() == []


def test_unfixable_is_reported_once_and_never_pages() -> None:
    a = state(for_s=60, keep_firing_for_s=60)
    # Every plan reads 80% cross-rack (replicas in one rack, members in others).
    events = [
        a.evaluate("consumer/g", loc(80), loc(80), loc(80), "initial state", now=t)
        for t in range(0, 3600, 30)
    ]
    reported = [e for e in events if e is not None]
    assert [(e.status, e.alertname, e.severity, e.at, e.started_at) for e in reported] == [
        (UNFIXABLE, UNFIXABLE_ALERTNAME, "info", 60, 0)
    ]
    assert a.firing() == [] and a.state("consumer/g") == UNFIXABLE
    # Lagging far behind that best plan is still actionable: that pages.
    assert a.evaluate("consumer/g", loc(30), loc(100), loc(40), "", now=3600) is None
    fired = a.evaluate("consumer/g", loc(100), loc(100), loc(40), "", now=3660)
    assert fired is not None and fired.status == FIRING
    # The plan becomes unfixable while it fires: resolved (after the hold-down), then reported once.
    out = [a.evaluate("consumer/g", loc(90), loc(90), loc(90), "", now=t) for t in range(3690, 4000, 30)]
    got = [(e.status, e.at, e.started_at) for e in out if e is not None]
    assert got == [(RESOLVED, 3750, 3600), (UNFIXABLE, 3780, 3690)]  # unfixable since the condition cleared


def test_a_group_fixable_again_can_be_reported_unfixable_again_later() -> None:
    a = state(for_s=0, keep_firing_for_s=60)
    assert a.evaluate("consumer/g", loc(80), loc(80), loc(80), "", now=0) is not None
    assert a.evaluate("consumer/g", loc(0), loc(0), loc(0), "", now=10) is None  # fixed (a rack came back)
    assert (
        a.evaluate("consumer/g", loc(80), loc(80), loc(80), "", now=20) is None
    )  # within the hold-down: quiet
    assert a.evaluate("consumer/g", loc(0), loc(0), loc(0), "", now=30) is None
    assert a.evaluate("consumer/g", loc(0), loc(0), loc(0), "", now=90) is None  # cleared for 60 s: forgotten
    ev = a.evaluate("consumer/g", loc(80), loc(80), loc(80), "", now=100)
    assert ev is not None and ev.status == UNFIXABLE


def test_events_carry_severity_runbook_schema_and_epoch_ms() -> None:
    a = state(for_s=0, severity="critical", runbook_url="https://git.example/rackplan/docs/runbook.md")
    ev = a.evaluate("consumer/g", loc(0), loc(40), loc(0), "r", now=1_700_000_000.123)
    assert ev is not None
    doc = ev.as_json()
    assert (
        doc["schema"] == ALERT_SCHEMA == 1 and doc["alertname"] == ALERTNAME and doc["severity"] == "critical"
    )
    assert doc["runbook_url"] == "https://git.example/rackplan/docs/runbook.md#rackplancrossracklocality"
    assert doc["at_ms"] == doc["started_at_ms"] == 1_700_000_000_123 and isinstance(doc["at_ms"], int)
    assert doc["at"] == 1_700_000_000.123  # the contract's field stays
    schema = json.loads((DOCS / "alert-schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(doc, schema)
    unfix = AlertEvent(
        "streams/app", UNFIXABLE, 1, 1, 1, 0.25, "y", 0, 0, "info", "rb#rackplanlocalityunfixable"
    )
    jsonschema.validate(unfix.as_json(), schema)
    assert set(schema["required"]) <= set(doc)


def test_a_worsening_of_exactly_worsen_delta_fires_whatever_the_float_rounding() -> None:
    # "at least alerts.worsen_delta above" (docs/agent.md): 1 -> 3 cross-rack partitions of 20 (5 % -> 15 %)
    # did not fire at the default 0.10, since 0.15 - 0.05 == 0.09999999999999999 in floating point, while
    # 2 -> 4 of 20 did.  The oracle: exact fractions against the decimal the settings file says.
    from fractions import Fraction

    wrong = []
    for delta in ("0.05", "0.1", "0.15", "0.2", "0.3"):
        for n in range(1, 41):
            for a in range(n + 1):
                for b in range(a, n + 1):
                    s = state(cross_rack_threshold=1.0, worsen_delta=float(delta), for_s=0)
                    ev = s.evaluate("consumer/g", loc(a, n), loc(b, n), None, "change", now=0)
                    want = b > 0 and Fraction(b - a, n) >= Fraction(delta)
                    if (ev is not None) != want:
                        wrong.append((delta, a, b, n))
    assert wrong == []


_FRACTIONS = st.integers(0, 100)


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(1, 90), _FRACTIONS, _FRACTIONS), min_size=1, max_size=60),
    for_s=st.sampled_from([0, 30, 60, 120]),
    keep_s=st.sampled_from([0, 30, 60, 120]),
)
def test_hold_down_invariants_against_an_oracle(
    steps: list[tuple[int, int, int]], for_s: int, keep_s: int
) -> None:
    """Random histories of (gap, current %, best plan %): every event is justified by the whole window."""
    a = state(for_s=for_s, keep_firing_for_s=keep_s, worsen_delta=1.0)
    history: list[tuple[int, str]] = []  # (time, condition)
    now, firing, unfixable_reports = 0, False, 0
    for gap, cur, plan in steps:
        now += gap
        cond = "unfixable" if plan > 25 and cur > 25 else ("bad" if cur > 25 and plan <= 25 else "ok")
        history.append((now, cond))
        ev = a.evaluate("consumer/g", loc(cur), loc(cur), loc(plan), "", now)
        if ev is None:
            continue

        def window(span: int, t: int = now) -> list[str]:
            return [c for when, c in history if t - span <= when <= t]

        # The oldest evaluation inside the window is at most `span` old: the condition held since before it.
        if ev.status == FIRING:
            assert not firing and all(c == "bad" for c in window(for_s)) and now - ev.started_at >= for_s
            firing = True
        elif ev.status == RESOLVED:
            assert firing and "bad" not in window(keep_s)
            firing = False
        else:
            assert ev.status == UNFIXABLE and not firing and all(c == "unfixable" for c in window(for_s))
            unfixable_reports += 1
    # Reported at most once per run of unfixable evaluations.
    runs = sum(
        1 for i, (_, c) in enumerate(history) if c == "unfixable" and (i == 0 or history[i - 1][1] != c)
    )
    assert unfixable_reports <= runs


def test_the_agent_holds_down_and_does_not_flap() -> None:
    """Through the loop (cycles of 30 s): a real assignment lagging behind a local plan fires after ``for_s``,
    with ``startsAt`` when it turned bad; once it follows, it resolves after ``keep_firing_for_s``."""
    admin = FakeAdmin({"t": [[1], [1], [2], [2]]})
    admin.groups = {
        "legacy": discovered(("c-1", "legacy-1", "10.0.1.5", [0, 1, 2, 3]), ("c-2", "b-2", "10.0.2.5", []))
    }
    legacy = {"group_id": "legacy", "assignor": "range", "members": [], "topics": ["t"]}
    rules = [{"host": "10.0.1.0/24", "rack": "az-a"}, {"host": "10.0.2.0/24", "rack": "az-b"}]
    hold = {
        "cross_rack_threshold": 0.25,
        "worsen_delta": 0.1,
        "cooldown_s": 0,
        "for_s": 60,
        "keep_firing_for_s": 60,
    }
    agent, pub, _ = make_agent(admin, [legacy], rack_mapping=rules, alerts=hold)
    first = cycle(agent)  # the plan is local (two each); the real assignment reads 2 of 4 cross-rack
    assert first.published and first.alerts == [] and agent.term.alerts.state("consumer/legacy") == "pending"
    t_bad = agent.tick[0]  # type: ignore[attr-defined]
    assert cycle(agent).alerts == []
    (ev,) = cycle(agent).alerts
    assert (ev.status, ev.started_at, ev.current) == ("firing", t_bad, 0.5)
    admin.groups = {
        "legacy": discovered(("c-1", "legacy-1", "10.0.1.5", [0, 1]), ("c-2", "b-2", "10.0.2.5", [2, 3]))
    }
    assert cycle(agent).alerts == [] and cycle(agent).alerts == []  # fine for 0 s, 30 s: still firing
    assert keys(cycle(agent).alerts) == [("consumer/legacy", "resolved")]  # fine for 60 s
    records = [v for _, v in pub.on("_rackplan.alerts")]
    assert [(r["status"], r["schema"]) for r in records] == [("firing", 1), ("resolved", 1)]
    assert records[0]["started_at_ms"] == round(t_bad * 1000)


def test_unfixable_means_no_assignment_helps_not_that_this_plan_is_bad() -> None:
    """'far' reads partitions whose only replicas are in az-c, where no member is: unfixable, reported once.
    'g' has all partitions in az-a; its balanced range plan gives half to the az-b member (50% cross-rack),
    but an assignment that reads them all in az-a exists: the balance/assignor choice is the operator's to
    make, so it pages."""
    admin = FakeAdmin({"t": [[1], [1], [1], [1]], "u": [[3], [3]]})
    agent, _, _ = make_agent(admin, [group("g"), group("far", topics=["u"])])
    r = cycle(agent)
    assert sorted(keys(r.alerts)) == [("consumer/far", "unfixable"), ("consumer/g", "firing")]
    (g,) = [e for e in r.alerts if e.key == "consumer/g"]
    assert (g.current, g.planned) == (0.5, 0.5)
    (far,) = [e for e in r.alerts if e.key == "consumer/far"]
    assert far.reason.startswith("initial state") and far.severity == "info"
    assert all(cycle(agent).alerts == [] for _ in range(5))
    assert agent.metrics.series("rackplan_alerts_unfixable") == {
        (("group", "far"), ("kind", "consumer")): 1.0
    }
    assert agent.metrics.get("rackplan_alerts_firing", {"kind": "consumer", "group": "g"}) == 1


def test_an_unfixable_group_waiting_out_for_s_is_pending() -> None:
    # /v1/groups' alert_state said "ok" for a group 80 % cross-rack that no assignment fixes while its report
    # waited out for_s (a bad group is "pending" then).  Found by a hunt.
    a = state(for_s=60, keep_firing_for_s=60)
    assert a.evaluate("consumer/g", loc(80), loc(80), loc(80), "initial state", now=0) is None
    assert a.state("consumer/g") == "pending"
    ev = a.evaluate("consumer/g", loc(80), loc(80), loc(80), "", now=60)
    assert ev is not None and ev.status == UNFIXABLE and a.state("consumer/g") == UNFIXABLE
