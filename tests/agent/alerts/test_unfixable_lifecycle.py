"""The unfixable report's life, as docs/agent.md ("Alerts") states it, next to the firing alert's.

"An unfixable group gets one event ... after the same for_s hold-down, and nothing more while it stays
unfixable; a firing alert whose group becomes unfixable resolves (reason no longer actionable), then the
unfixable report follows. Once an unfixable group has been fixable for keep_firing_for_s it is forgotten
and may be reported again later."  rackplan_alerts_unfixable is "1 while the group is reported unfixable"
(``AlertState.unfixable()``).  A group that fired while reported unfixable stayed reported for ever, and
its unfixable report never came back.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.agent.alerts.rules import AlertState
from rackplan.agent.protocol.alerts import FIRING, RESOLVED, UNFIXABLE
from rackplan.agent.protocol.plans import Locality
from rackplan.agent.settings.sections import AlertSettings

K = "consumer/g"
#: (bad?, fixable?) -> (current, best) cross-rack partitions of 10; threshold 25 %
_LOCALITY = {(True, True): (5, 0), (True, False): (5, 4), (False, True): (0, 0), (False, False): (0, 4)}


def state(**kw: Any) -> AlertState:
    return AlertState(AlertSettings(**{"cross_rack_threshold": 0.25, "worsen_delta": 1.0, **kw}))


def judge(a: AlertState, bad: bool, fixable: bool, now: float, reason: str = "") -> Any:
    cur, best = _LOCALITY[(bad, fixable)]
    return a.evaluate(
        K, Locality(cur, 10), Locality(cur, 10), Locality(best, 10), reason, now, best=Locality(best, 10)
    )


def test_a_group_that_fires_while_reported_unfixable_is_forgotten_and_reported_again() -> None:
    a = state(for_s=30, keep_firing_for_s=300, cooldown_s=0)
    assert judge(a, True, False, 0) is None
    assert judge(a, True, False, 30).status == UNFIXABLE
    assert judge(a, True, True, 120) is None  # replicas moved: fixable, and bad
    assert judge(a, True, True, 150).status == FIRING
    assert a.unfixable() == [K]  # fixable for 30 s only
    assert judge(a, True, True, 420) is None
    assert a.unfixable() == [] and a.state(K) == FIRING  # fixable for keep_firing_for_s: forgotten
    assert judge(a, True, False, 600) is None  # unfixable again: the alert waits out keep_firing_for_s
    ev = judge(a, True, False, 900)
    assert ev.status == RESOLVED and ev.reason.startswith("no longer actionable")
    ev = judge(a, True, False, 930)
    assert ev is not None and (ev.status, ev.started_at) == (UNFIXABLE, 600)  # then the report follows
    assert a.unfixable() == [K] and a.state(K) == UNFIXABLE


def test_the_report_follows_a_resolution_even_before_the_group_was_forgotten() -> None:
    a = state(for_s=0, keep_firing_for_s=300, cooldown_s=0)
    assert judge(a, True, False, 0).status == UNFIXABLE
    assert judge(a, True, True, 10).status == FIRING
    assert judge(a, True, False, 20) is None  # unfixable again after 10 s: still reported, not forgotten
    assert a.unfixable() == [K]
    assert judge(a, True, False, 320).status == RESOLVED
    assert a.unfixable() == [K]  # reported all along: no gap in rackplan_alerts_unfixable
    assert judge(a, True, False, 350).status == UNFIXABLE
    assert judge(a, True, False, 380) is None  # once


def test_a_resent_firing_alert_carries_the_current_values() -> None:
    a = state(for_s=0, keep_firing_for_s=60, cooldown_s=0)
    fired = a.evaluate(K, Locality(0, 10), Locality(5, 10), Locality(0, 10), "racks changed", 0)
    assert fired is not None and fired.status == FIRING
    assert a.evaluate(K, Locality(5, 10), Locality(8, 10), Locality(1, 10), "", 30) is None
    (held,) = a.firing_events()
    assert (held.current, held.planned, held.reason, held.started_at) == (0.8, 0.1, "racks changed", 0)
    assert a.evaluate(K, Locality(8, 10), Locality(7, 10), Locality(0, 10), "broker 3 moved", 60) is None
    (held,) = a.firing_events()
    assert (held.current, held.reason, held.previous) == (0.7, "broker 3 moved", 0.0)
    a.hold([dataclasses.replace(held, cross_rack_dollars_per_month=12.5)])  # the cycle priced it
    assert a.firing_events()[0].cross_rack_dollars_per_month == 12.5
    assert a.evaluate(K, Locality(7, 10), Locality(0, 10), Locality(0, 10), "", 90) is None
    ev = a.evaluate(K, Locality(0, 10), Locality(0, 10), Locality(0, 10), "", 150)
    assert ev is not None and (ev.status, ev.current, ev.previous) == (RESOLVED, 0.0, 0.5)
    assert a.firing_events() == []


_STEPS = st.lists(st.tuples(st.integers(1, 90), st.booleans(), st.booleans()), min_size=1, max_size=80)


@settings(max_examples=400, deadline=None)
@given(
    steps=_STEPS,
    for_s=st.sampled_from([0, 30, 60, 120]),
    keep_s=st.sampled_from([0, 30, 60, 120, 300]),
    cooldown_s=st.sampled_from([0, 100]),
)
def test_random_histories_keep_the_documented_unfixable_invariants(
    steps: list[tuple[int, bool, bool]], for_s: int, keep_s: int, cooldown_s: int
) -> None:
    """Random (gap, bad/ok, fixable/unfixable) histories.  At every evaluation:

    1. reported once: an unfixable event comes exactly when the group has been unfixable for ``for_s``, does
       not fire, and is not reported already (unless a firing alert resolved as unfixable since: then the
       report follows);
    2. forgotten: a reported group fixable (firing or not) for ``keep_firing_for_s`` is no longer reported;
    3. ``unfixable()`` (the metric) is exactly the groups reported and not forgotten;
    4. a firing alert that resolves while the group is unfixable says "no longer actionable".
    """
    a = state(for_s=for_s, keep_firing_for_s=keep_s, cooldown_s=cooldown_s)
    now, firing, reported, due = 0, False, False, False
    unfixable_since: int | None = None
    fixable_since: int | None = None
    for gap, bad, fixable in steps:
        now += gap
        unfixable = bad and not fixable
        if unfixable:
            unfixable_since = now if unfixable_since is None else unfixable_since
            fixable_since = None
        else:
            unfixable_since = None
            if reported:
                fixable_since = now if fixable_since is None else fixable_since
                if now - fixable_since >= keep_s:
                    reported, due, fixable_since = False, False, None  # 2: forgotten
        ev = judge(a, bad, fixable, now)
        status = None if ev is None else ev.status
        if firing:
            assert status in (None, RESOLVED)
            if status == RESOLVED:
                firing = False
                if unfixable:
                    assert ev.reason.startswith("no longer actionable")  # 4
                    due = True
        else:
            owed = unfixable and (not reported or due) and now - (unfixable_since or now) >= for_s
            assert (status == UNFIXABLE) == owed, (now, status, owed)  # 1
            if status == UNFIXABLE:
                reported, due = True, False
                assert ev.started_at == unfixable_since
            elif status == FIRING:
                assert bad and fixable
                firing = True
            else:
                assert status is None
        assert (K in a.unfixable()) == reported, (now, reported)  # 3
        assert a.firing() == ([K] if firing else [])


def test_a_resolution_for_unfixable_says_so_whatever_the_change_was() -> None:
    # The cycle passes a reason when a change is judged (the change's, "replica racks changed: t-1, t-2")
    # and every cycle for a group the broker assigns ("the broker's assignment: ..."): the resolved event
    # then said only that, and an operator read "resolved: replica racks changed" as "fixed", while the
    # group had become unfixable (docs/agent.md: it "resolves (reason `no longer actionable`)").
    a = state(for_s=0, keep_firing_for_s=0, cooldown_s=0)
    assert judge(a, True, True, 0, "replica racks changed: t-0").status == FIRING
    ev = judge(a, True, False, 30, "replica racks changed: t-1, t-2")
    assert ev.status == RESOLVED and ev.reason.startswith("no longer actionable"), ev.reason
    assert ev.reason.endswith("replica racks changed: t-1, t-2")  # what changed is still told
    assert judge(a, True, False, 60, "").status == UNFIXABLE
