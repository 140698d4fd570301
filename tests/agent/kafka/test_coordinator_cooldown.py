"""A group whose coordinator timed out is not asked again for a while (``isolated_admin.Cooldown``).

The broker-kill scenario on real Kafka (integration/test_kafka_operations.py) made the agent's cycles
25-50 s long: every DescribeGroups and ListConsumerGroupOffsets of a group whose coordinator had just
died waited for its whole timeout.  Here the child is a fake that counts what it is asked, and the
clock is the test's.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, KafkaException

from rackplan.agent.kafka.errors import error_name
from rackplan.agent.kafka.isolated_admin import COOL_BASE_S, COOL_MAX_S, Cooldown, IsolatedGroupsAdmin


class Worker:
    """Answers like the describe worker: groups in ``slow`` time out, the rest answer."""

    pid: int | None = 1  # a child is running: no start-up time added to the wait

    def __init__(self) -> None:
        self.slow: set[str] = set()
        self.asked: list[tuple[str, list[str]]] = []

    def _answer(self, op: str, group_ids: list[str]) -> dict[str, tuple[bool, Any]]:
        self.asked.append((op, list(group_ids)))
        timed_out = KafkaException(KafkaError(KafkaError._TIMED_OUT, "Local: Timed out"))
        return {g: (False, timed_out) if g in self.slow else (True, f"{op}:{g}") for g in group_ids}

    def describe(self, group_ids: list[str], _timeout: float) -> dict[str, tuple[bool, Any]]:
        return self._answer("describe", group_ids)

    def committed(self, group_ids: list[str], _timeout: float) -> dict[str, tuple[bool, Any]]:
        return self._answer("committed", group_ids)


def admin() -> tuple[IsolatedGroupsAdmin, Worker, list[float]]:
    clock = [100.0]
    worker = Worker()
    return IsolatedGroupsAdmin(None, worker, Cooldown(lambda: clock[0])), worker, clock  # type: ignore[arg-type]


def describe(a: IsolatedGroupsAdmin, *groups: str) -> dict[str, str]:
    """Each group's answer: its description, or the error's name."""
    out = {}
    for g, f in a.describe_consumer_groups(list(groups), request_timeout=10).items():
        e = f.exception()
        out[g] = f.result() if e is None else error_name(e)
    return out


def test_a_timeout_pauses_every_group_briefly_and_the_timed_out_one_for_its_own_period() -> None:
    a, worker, clock = admin()
    worker.slow = {"dead"}
    assert describe(a, "dead", "live") == {"dead": "_TIMED_OUT", "live": "describe:live"}  # one call
    clock[0] += COOL_BASE_S - 0.1  # nobody is asked: several groups on one dead coordinator cost one timeout
    assert describe(a, "dead", "live") == {"dead": "_TIMED_OUT", "live": "_TIMED_OUT"}
    assert worker.asked == [("describe", ["dead", "live"])]
    skipped = a.describe_consumer_groups(["dead"], request_timeout=10)["dead"].exception()
    assert skipped is not None and f"asked again within {COOL_BASE_S:.0f} s" in str(skipped)
    clock[0] += 0.2  # over: asked again, and times out again: 10 s for it, 5 s for everyone
    assert describe(a, "dead") == {"dead": "_TIMED_OUT"} and worker.asked[-1] == ("describe", ["dead"])
    clock[0] += COOL_BASE_S + 0.1  # the pause for everyone is over, dead's own is not
    assert describe(a, "dead", "live") == {"dead": "_TIMED_OUT", "live": "describe:live"}
    assert worker.asked[-1] == ("describe", ["live"])


def test_the_period_doubles_while_it_keeps_timing_out_up_to_the_cap_and_an_answer_ends_it() -> None:
    a, worker, clock = admin()
    worker.slow = {"dead"}
    describe(a, "dead")  # the first timeout
    periods = []
    for _ in range(6):
        start, asked = clock[0], len(worker.asked)
        while len(worker.asked) == asked:  # step the clock until it is asked (and times out) again
            clock[0] += 0.5
            describe(a, "dead")
        periods.append(clock[0] - start)
    assert periods == [COOL_BASE_S, 2 * COOL_BASE_S, 4 * COOL_BASE_S, 8 * COOL_BASE_S, COOL_MAX_S, COOL_MAX_S]
    worker.slow.clear()
    clock[0] += COOL_MAX_S
    assert describe(a, "dead") == {"dead": "describe:dead"}
    assert describe(a, "dead") == {"dead": "describe:dead"}  # answered: asked again at once
    assert worker.asked[-2:] == [("describe", ["dead"])] * 2


def test_both_operations_share_the_period_and_other_errors_start_none() -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions

    a, worker, clock = admin()
    worker.slow = {"dead"}
    describe(a, "dead")
    got = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions("dead")], request_timeout=10)
    e = got["dead"].exception()
    assert e is not None and error_name(e) == "_TIMED_OUT" and worker.asked == [("describe", ["dead"])]

    cooldown = Cooldown(lambda: clock[0])
    cooldown.note("gone", False, KafkaException(KafkaError(KafkaError.GROUP_ID_NOT_FOUND)))
    cooldown.note("refused", False, KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)))
    assert cooldown.left("gone") is None and cooldown.left("refused") is None
    cooldown.note("slow", False, KafkaException(KafkaError(KafkaError.REQUEST_TIMED_OUT)))
    assert cooldown.left("slow") == COOL_BASE_S
