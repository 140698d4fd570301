"""Firing alerts the agent holds are re-sent on schedule, with their current values.

During a metadata outage the cycle returned before sending anything: a firing alert was not re-sent, its
``endsAt`` passed, Alertmanager resolved it while the agent still said it fired
(``rackplan_alerts_firing`` 1), and it fired again after the outage (a flap).  And a re-sent alert carried
the values of when it first fired, not the group's current ones.
"""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

from rackplan.agent.testing import TP as KafkaTP
from rackplan.agent.testing import FakeAdmin, GroupDesc, MemberAssignment, MemberDesc
from tests.agent.cycle.test_run import cycle, group, make_agent


def _members(a: list[int], b: list[int]) -> dict[str, GroupDesc]:
    return {
        "g": GroupDesc(
            "g",
            [
                MemberDesc("g-a", "c", "/10.0.0.1", MemberAssignment([KafkaTP("t", p) for p in a])),
                MemberDesc("g-b", "c", "/10.0.0.2", MemberAssignment([KafkaTP("t", p) for p in b])),
            ],
        )
    }


def _ts(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _agent(posts: list[Any]) -> tuple[Any, FakeAdmin]:
    admin = FakeAdmin({"t": [[1], [1], [2], [2]]})
    agent, _, _ = make_agent(
        admin,
        [group("g")],
        posts=posts,
        webhook={"url": "http://am.invalid/api/v2/alerts", "resend_interval_s": 60},
        poll_interval_s=30,
    )
    admin.groups = _members([2, 3], [0, 1])  # every partition read cross-rack: the alert fires
    return agent, admin


def test_firing_alerts_are_resent_through_a_metadata_outage_and_never_expire() -> None:
    posts: list[Any] = []
    agent, admin = _agent(posts)
    (ev,) = cycle(agent).alerts
    assert ev.status == "firing" and agent.webhook is not None and agent.webhook.wait_idle(5)
    posts.clear()
    labels = {"kind": "consumer", "group": "g"}
    admin.down = True
    sent: list[tuple[float, dict[str, Any]]] = []
    for _ in range(12):  # six minutes without metadata: longer than endsAt's 4 x 60 s
        report = cycle(agent)
        assert not report.ok and report.alerts == []
        assert agent.webhook is not None and agent.webhook.wait_idle(5)
        sent += [(agent.tick[0], a) for body in posts for a in body]
        posts.clear()
        assert agent.metrics.get("rackplan_alerts_firing", labels) == 1
    assert len(sent) == 6  # every resend_interval_s, as while the metadata was there
    assert all(a["startsAt"] == sent[0][1]["startsAt"] and _ts(a["endsAt"]) > at for at, a in sent)
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(sent)]
    assert all(g == 60 for g in gaps)
    admin.down = False
    assert cycle(agent).alerts == []  # no flap: the alert never stopped firing anywhere
    agent.close()


def test_a_resent_firing_alert_carries_the_groups_current_locality() -> None:
    posts: list[Any] = []
    agent, admin = _agent(posts)
    assert [e.status for e in cycle(agent).alerts] == ["firing"]
    admin.groups = _members([2, 3, 0], [1])  # 3 of 4 cross-rack: still bad, another fraction
    assert cycle(agent).alerts == [] and cycle(agent).alerts == []
    assert agent.webhook is not None and agent.webhook.wait_idle(5)
    now = [a["annotations"]["cross_rack_fraction_now"] for body in posts for a in body]
    assert now == ["1.000000", "0.750000"]  # the first send, then the re-send 60 s later
    agent.close()


def test_a_describe_outage_neither_resolves_a_live_alert_nor_hides_it_afterwards() -> None:
    # DescribeConsumerGroups failed for the group (a coordinator moving: a broker restart) for as long as
    # keep_firing_for_s: the firing alert, raised on the live assignment, was judged on the plan of record
    # instead (all local: the members do not follow it), resolved as "locality recovered", and once the
    # group was described again, still reading every partition across racks, it never fired again (nothing
    # re-judges a group no alert tracks without a metadata change): alert_state "ok" at 100 % cross-rack.
    from confluent_kafka import KafkaError

    from rackplan.agent.testing import kafka_error

    posts: list[Any] = []
    agent, admin = _agent(posts)
    assert [e.status for e in cycle(agent).alerts] == ["firing"]
    described = admin.groups
    admin.groups = {"g": kafka_error(KafkaError.REQUEST_TIMED_OUT)}
    for _ in range(4):  # two minutes; keep_firing_for_s is 0
        assert cycle(agent).alerts == []
        assert agent.term.alerts.state("consumer/g") == "firing"
    admin.groups = described  # described again: every partition still read cross-rack
    assert cycle(agent).alerts == []
    assert agent.term.alerts.state("consumer/g") == "firing"
    assert agent.metrics.get("rackplan_alerts_firing", {"kind": "consumer", "group": "g"}) == 1
    assert agent.webhook is not None and agent.webhook.wait_idle(5)
    sent = [a for body in posts for a in body]
    assert sent and all(_ts(a["endsAt"]) > agent.tick[0] for a in sent[-1:])  # re-sent through the outage
    assert len(sent) == 1 + 2  # fired, then re-sent every resend_interval_s (60 s) of the 150 s
    agent.close()


def test_a_change_during_a_describe_outage_does_not_resolve_a_live_alert_on_the_plan() -> None:
    # The same outage, and a confirmed metadata change of the group's topic meanwhile (a leader moved): the
    # change's judgement fell back on the plans of record as well and resolved the live alert.
    from confluent_kafka import KafkaError

    from rackplan.agent.testing import kafka_error

    agent, admin = _agent([])
    assert [e.status for e in cycle(agent).alerts] == ["firing"]
    described = admin.groups
    admin.groups = {"g": kafka_error(KafkaError.REQUEST_TIMED_OUT)}
    admin.topics = {"t": [[1, 2], [1], [2], [2]]}  # partition 0 gains a replica in az-b
    report = cycle(agent)
    assert report.confirmed and report.alerts == []
    assert agent.term.alerts.state("consumer/g") == "firing"
    admin.groups = described
    assert cycle(agent).alerts == [] and agent.term.alerts.state("consumer/g") == "firing"
    agent.close()


def test_a_live_assignment_that_turns_cross_rack_without_a_metadata_change_is_judged() -> None:
    # The members (not following their plan) rebalanced onto the other rack's partitions: described every
    # cycle, 4 of 4 read cross-rack (/v1/groups ``live``), the plan all local, and the alert was never judged
    # (no confirmed metadata change, no initial state, not tracked): alert_state "ok" for ever.
    posts: list[Any] = []
    agent, admin = _agent(posts)
    admin.groups = _members([0, 1], [2, 3])  # every partition read locally
    assert cycle(agent).alerts == []
    admin.groups = _members([2, 3], [0, 1])
    (ev,) = cycle(agent).alerts
    assert (ev.status, ev.current, ev.planned) == ("firing", 1.0, 0.0)
    assert ev.reason == "live assignment: 4 of 4 partitions read cross-rack"
    assert agent.status().group_json("consumer", "g")["alert_state"] == "firing"
    admin.groups = _members([0, 1], [2, 3])  # they took the plan
    assert [e.status for e in cycle(agent).alerts] == ["resolved"]
    agent.close()
