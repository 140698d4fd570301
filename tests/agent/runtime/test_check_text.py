"""``rackplan check``'s text for a group the broker assigns (issue 27 §4): its path and judgement, not "no plan"."""

from __future__ import annotations

from typing import NoReturn

import pytest

from rackplan.agent.kafka.exceptions import TopicReadError
from rackplan.agent.runtime import check
from rackplan.agent.runtime.check import group_entry
from rackplan.agent.runtime.check_text import group_line
from rackplan.agent.settings.sections import Settings
from rackplan.agent.testing import FakeAdmin
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
