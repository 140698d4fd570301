"""A new leader names other deployments' agents in its group (agent/ha/shared_group.py), and only those."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import structlog
from structlog.testing import capture_logs

from rackplan.agent.groups.membership import real_group
from rackplan.agent.ha.shared_group import CHECK_TIMEOUT_S, other_lease_topics, warn_if_shared
from rackplan.agent.kafka.embedded import EmbeddedCluster
from rackplan.agent.kafka.timeouts import operation_timeout_s
from rackplan.agent.metrics.registry import Metrics
from rackplan.agent.settings.sections import Settings
from rackplan.agent.state.term import Wiring
from rackplan.agent.testing import TP, FakeAdmin, GroupDesc, MemberAssignment, MemberDesc


def member(name: str, *parts: tuple[str, int]) -> MemberDesc:
    return MemberDesc(
        name, f"rackplan-agent-{name}", "/10.0.0.1", MemberAssignment([TP(t, p) for t, p in parts])
    )


def wiring(**ha: Any) -> Wiring:
    s = Settings.model_validate({"ha": {"enabled": True, **ha}})
    return Wiring(s, structlog.get_logger(), Metrics(), lambda: 0.0, threading.Event(), "agent-a")


def admin_with(*members: MemberDesc, group: str = "rackplan-agents") -> FakeAdmin:
    return FakeAdmin(topics={}, groups={group: GroupDesc(group, list(members))})


def test_the_lease_topics_of_other_members_are_named_once_each_and_ours_never() -> None:
    group = real_group(
        GroupDesc(
            "rackplan-agents",
            [
                member("a", ("_rackplan.lease", 0)),
                member("b", ("_team-b.lease", 0)),
                member("c"),  # a standby of either: holds nothing
                member("d", ("_team-c.lease", 0), ("_team-b.lease", 0)),
            ],
        )
    )
    assert other_lease_topics(group, "_rackplan.lease") == ["_team-b.lease", "_team-c.lease"]
    assert other_lease_topics(group, "_team-b.lease") == ["_rackplan.lease", "_team-c.lease"]


def test_a_shared_group_is_a_warning_naming_the_other_deployment_and_the_setting() -> None:
    admin = admin_with(member("a", ("_rackplan.lease", 0)), member("b", ("_rackplan-try.lease", 0)))
    with capture_logs() as logs:
        assert warn_if_shared(wiring(), admin) == ["_rackplan-try.lease"]
    assert admin.groups_described == [["rackplan-agents"]]
    (warning,) = [e for e in logs if e["log_level"] == "warning"]
    assert "ha.group_id" in warning["event"] and warning["other_lease_topics"] == ["_rackplan-try.lease"]
    assert warning["group"] == "rackplan-agents" and warning["lease_topic"] == "_rackplan.lease"


def test_our_own_group_alone_and_standbys_say_nothing() -> None:
    admin = admin_with(member("a", ("_rackplan.lease", 0)), member("b"), group="ours")
    with capture_logs() as logs:
        assert warn_if_shared(wiring(group_id="ours"), admin) == []
    assert admin.groups_described == [["ours"]] and not [e for e in logs if e["log_level"] != "debug"]


def test_a_group_that_cannot_be_described_is_not_checked_and_said_so_at_info() -> None:
    admin = FakeAdmin(topics={}, groups=None)  # DescribeGroups unsupported, as on the embedded cluster
    with capture_logs() as logs:
        assert warn_if_shared(wiring(), admin) is None
    assert [e["log_level"] for e in logs] == ["info"] and "not checked" in logs[0]["event"]
    assert logs[0]["error"] == "_UNSUPPORTED_FEATURE"


def test_an_agent_without_a_lease_asks_nothing() -> None:
    admin = admin_with(member("b", ("_rackplan-try.lease", 0)))
    assert warn_if_shared(wiring(enabled=False), admin) is None and admin.groups_described == []


def test_the_demos_try_settings_are_a_deployment_of_their_own(tmp_path: Path) -> None:
    """``rackplan demo --keep-running``'s ``agent run`` once shared the demo agent's group (CI: standby
    for over 30 s in 2 runs of 4): its settings now name another group and other topics."""
    from rackplan.agent.demo.run import demo_settings, write_try_settings

    with EmbeddedCluster(brokers_per_rack=1, racks=3) as c:
        demo, _ = demo_settings(c.bootstrap_servers, 0.5, "warning")
        mine = write_try_settings(c, demo, str(tmp_path / "try.yaml"))
    assert mine.ha.group_id != demo.ha.group_id and mine.ha.lease_topic != demo.ha.lease_topic
    ours = {mine.plan_topic, mine.alerts_topic, mine.registrations_topic, mine.traffic_topic}
    assert not ours & {demo.plan_topic, demo.alerts_topic, demo.registrations_topic, demo.traffic_topic}


def test_the_check_asks_for_at_most_a_short_timeout_whatever_the_settings() -> None:
    """At the end of the term's start-up: a coordinator that does not answer holds the plans up briefly."""
    asked: list[float] = []

    class Recording(FakeAdmin):
        def describe_consumer_groups(self, group_ids: list[str], **kw: Any) -> Any:
            asked.append(kw["request_timeout"])
            return super().describe_consumer_groups(group_ids, **kw)

    for request_timeout_s in (15.0, 0.5):
        w = wiring()
        w.settings = Settings.model_validate(
            {"ha": {"enabled": True}, "metadata": {"request_timeout_s": request_timeout_s}}
        )
        admin = Recording(topics={}, groups={"rackplan-agents": GroupDesc("rackplan-agents", [member("a")])})
        assert warn_if_shared(w, admin) == []
        assert asked[-1] == operation_timeout_s(min(request_timeout_s, CHECK_TIMEOUT_S))
