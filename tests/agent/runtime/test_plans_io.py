"""``rackplan plans``' live source: DescribeConsumerGroups, a coordinator moving waited out, a refusal at once."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError

from rackplan.agent.runtime.plans_io import PlansProblem, describer
from rackplan.agent.testing import TP, FakeAdmin, GroupDesc, MemberAssignment, MemberDesc, done, kafka_error


class Answers(FakeAdmin):
    """A FakeAdmin whose DescribeConsumerGroups gives ``answers`` in turn."""

    def __init__(self, *answers: Future[Any]) -> None:
        super().__init__(topics={})
        self.answers = list(answers)

    def describe_consumer_groups(self, group_ids: list[str], **_kw: Any) -> dict[str, Future[Any]]:
        self.groups_described.append(list(group_ids))
        return {g: self.answers.pop(0) for g in group_ids}


GROUP = GroupDesc("g", [MemberDesc("k-1", "c", "/10.0.0.1", MemberAssignment([TP("t", 0)]), "m-1")])


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def test_a_coordinator_moving_is_asked_again_with_backoff() -> None:
    admin = Answers(
        kafka_error(KafkaError.COORDINATOR_LOAD_IN_PROGRESS),
        kafka_error(KafkaError.NOT_COORDINATOR),
        done(GROUP),
    )
    clock = Clock()
    real = describer(admin, 5.0, 10.0, 0.5, clock.sleep, lambda: clock.now)("g")
    assert real.assignment() == {"k-1": [["t", 0]]} and real.members[0].group_instance_id == "m-1"
    assert clock.slept == [0.5, 1.0] and len(admin.groups_described) == 3


def test_a_refusal_is_a_problem_at_once_and_a_lasting_outage_after_the_budget() -> None:
    clock = Clock()
    admin = Answers(kafka_error(KafkaError.GROUP_AUTHORIZATION_FAILED))
    with pytest.raises(PlansProblem, match="GROUP_AUTHORIZATION_FAILED"):
        describer(admin, 5.0, 10.0, 0.5, clock.sleep, lambda: clock.now)("g")
    assert clock.slept == []
    admin = Answers(*[kafka_error(KafkaError.COORDINATOR_NOT_AVAILABLE) for _ in range(10)])
    with pytest.raises(PlansProblem, match="COORDINATOR_NOT_AVAILABLE"):
        describer(admin, 5.0, 10.0, 0.5, clock.sleep, lambda: clock.now)("g")
    assert clock.slept == [0.5, 1.0, 2.0, 4.0]  # 7.5 s; the next 8 s would pass the 10 s budget
