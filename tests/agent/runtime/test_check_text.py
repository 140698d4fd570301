"""``rackplan check``'s text for a group the broker assigns (issue 27 §4): its path and judgement, not "no plan"."""

from __future__ import annotations

from typing import NoReturn

import pytest

from rackplan.agent.kafka.exceptions import TopicReadError
from rackplan.agent.protocol.alerts import ALERTNAME, UNFIXABLE_ALERTNAME
from rackplan.agent.runtime import check
from rackplan.agent.runtime.check import group_entry
from rackplan.agent.runtime.check_text import group_line, render
from rackplan.agent.settings.sections import Settings
from rackplan.agent.testing import FakeAdmin
from tests.agent.cycle.test_alerts_held import _members
from tests.agent.cycle.test_broker_groups import TOPICS, crossed
from tests.agent.cycle.test_run import cycle, group, make_agent


def test_a_kip848_group_is_shown_with_its_path_and_live_against_achievable() -> None:
    admin = FakeAdmin(TOPICS)
    agent, _, _ = make_agent(admin, [group("k")])
    admin.groups = {"k": crossed("k")}
    r = cycle(agent)
    shown = agent.status().group_json("consumer", "k")
    assert shown is not None
    entry = group_entry(shown, None, r.skipped.get("consumer/k"))
    assert group_line(entry) == (
        "assigned by the broker (kip848-broker, assignor uniform): no plan; "
        "cross-rack partitions live 4, achievable 0 of 4"
    )


def test_a_plan_topic_that_cannot_be_read_to_its_end_is_a_problem_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def unreadable(*_a: object, **_k: object) -> NoReturn:
        raise TopicReadError("topic '_rackplan.plans' partition 0: end offset unknown")

    monkeypatch.setattr(check, "read_back", unreadable)
    admin = FakeAdmin({**TOPICS, "_rackplan.plans": [[1]]})
    settings = Settings.model_validate(
        {"consumer_groups": [group("pay")], "traffic": {"enabled": False}, "metadata": {"max_attempts": 1}}
    )
    found = check.run_check(settings, admin=admin)
    assert found.problems[0].startswith("the plan topic could not be read to its end"), found.problems
    assert "end offset unknown" in found.problems[0]
    assert [g["key"] for g in found.groups] == ["consumer/pay"]


def _would_alert(for_s: float | None) -> check.Findings:
    """``g``'s members read every partition cross-rack (live, against an all-local plan): fixable; ``far``'s
    members are in az-a and az-b, every replica of its topic in az-c: no assignment fixes it."""
    admin = FakeAdmin({"t": [[1], [1], [2], [2]], "far": [[3], [3]]})
    admin.groups = _members([2, 3], [0, 1])
    alerts = {} if for_s is None else {"for_s": for_s}
    settings = Settings.model_validate(
        {
            "consumer_groups": [group("g"), group("far", topics=["far"])],
            "alerts": alerts,
            "traffic": {"enabled": False},
            "metadata": {"max_attempts": 1},
        }
    )
    return check.run_check(settings, admin=admin)


def test_a_group_that_would_alert_is_listed_pending_under_the_default_hold_down() -> None:
    """One cycle never waits out ``alerts.for_s`` (60 s by default): the check listed no alert and said "ok"
    for a group read all cross-rack and for one no assignment can fix.  Now each is listed ``pending`` with
    the alert it becomes once the condition holds for ``for_s``.  Found by a hunt."""
    found = _would_alert(None)
    assert not found.problems
    assert sorted((a["key"], a["status"], a["alertname"]) for a in found.alerts) == [
        ("consumer/far", "pending", UNFIXABLE_ALERTNAME),
        ("consumer/g", "pending", ALERTNAME),
    ]
    text = render(found.as_json())
    assert (
        "alert: consumer/g pending (RackplanCrossRackLocality once it holds for alerts.for_s, 60 s): "
        "initial state: 4 of 4 partitions read cross-rack\n"
    ) in text
    assert (
        "alert: consumer/far pending (RackplanLocalityUnfixable once it holds for alerts.for_s, 60 s): "
        in text
    )
    assert text.endswith("ok, 2 alert(s) pending\n")


def test_without_a_hold_down_the_check_lists_what_the_agent_would_send_at_once() -> None:
    found = _would_alert(0)
    assert sorted((a["key"], a["status"]) for a in found.alerts) == [
        ("consumer/far", "unfixable"),
        ("consumer/g", "firing"),
    ]
    assert render(found.as_json()).endswith("ok, 2 alert(s)\n")


def test_names_and_reasons_reach_the_terminal_escaped() -> None:
    """Group names, member ids and racks come from the registrations topic: an escape sequence in one reached
    the terminal as it was (plans_text.printable).  Found by a hunt."""
    doc = _would_alert(None).as_json()
    doc["groups"][0]["key"] = "consumer/g\x1b[2J"
    doc["alerts"][0]["reason"] = "x\nproblem: forged"
    out = render(doc)
    assert "\x1b" not in out and "consumer/g\\x1b[2J" in out and "x\\nproblem: forged" in out
