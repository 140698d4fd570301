"""``rackplan check``'s text for a group the broker assigns (issue 27 §4): its path and judgement, not "no plan"."""

from __future__ import annotations

from rackplan.agent.runtime.check import group_entry
from rackplan.agent.runtime.check_text import group_line
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
