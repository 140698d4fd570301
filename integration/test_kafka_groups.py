"""Real consumer groups on real Kafka (issue scenario 4): confluent-kafka consumers with ``client.rack``
on the classic protocol (range, cooperative-sticky) and on KIP-848 (``group.protocol=consumer``, the
brokers assign).  The agent discovers their members with DescribeGroups, maps racks by client id, and
judges the locality of the assignment Kafka actually made.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer

from .conftest import RunningAgent, Target
from .test_kafka_operations import create, settings_doc

RunAgent = Callable[..., RunningAgent]
RACK_OF_BROKER = {1: "az-a", 2: "az-b", 3: "az-c", 4: "az-a", 5: "az-b", 6: "az-c"}


class PollingConsumer:
    """A confluent-kafka consumer polled on its own thread; ``assignment`` is what Kafka gave it.

    The assignment is kept from the rebalance callbacks (increments for cooperative, whole sets for
    eager protocols): calling the consumer from another thread while it polls blocks.
    """

    def __init__(self, config: dict[str, Any], topic: str) -> None:
        self.consumer = Consumer(config)
        self.rack = str(config["client.rack"])
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._owned: set[tuple[str, int]] = set()
        self.consumer.subscribe(
            [topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked
        )
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _assigned(self, _c: Any, parts: list[Any]) -> None:
        with self._lock:
            self._owned.update((tp.topic, tp.partition) for tp in parts)

    def _revoked(self, _c: Any, parts: list[Any]) -> None:
        with self._lock:
            self._owned.difference_update((tp.topic, tp.partition) for tp in parts)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(0.1)

    def assignment(self) -> list[tuple[str, int]]:
        with self._lock:
            return sorted(self._owned)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.consumer.close()


@pytest.mark.parametrize(
    ("protocol", "assignor", "mapped"),
    [
        ("classic", "range", True),
        ("classic", "cooperative-sticky", True),
        ("consumer", None, True),
        ("classic", "range", False),
        ("consumer", None, False),
    ],
    ids=["classic-range", "classic-cooperative-sticky", "kip848", "classic-unmapped", "kip848-unmapped"],
)
def test_live_groups_are_discovered_and_judged_on_their_real_assignment(
    real: Target, run_agent: RunAgent, e2e_report: Any, protocol: str, assignor: str | None, mapped: bool
) -> None:
    # Unmapped: no rack_mapping and no registration names the members' racks (the brokers never say
    # them): every live partition is counted unknown, none local (issue 24, item 1: unknown counted as
    # local before, so such a group looked perfect).
    # Six partitions, one replica each: racks az-a, az-b, az-c, az-a, az-b, az-c.
    topic = create(real, f"live-{protocol}-{assignor or 'server'}", [[b] for b in range(1, 7)])
    group = real.name(f"live-{protocol}-{assignor or 'server'}")
    consumers = []
    for r in "abc":
        config: dict[str, Any] = {
            "bootstrap.servers": real.bootstrap,
            "group.id": group,
            "client.id": f"legacy-az-{r}-1",
            "client.rack": f"az-{r}",
            "group.protocol": protocol,
            "enable.auto.commit": False,
        }
        if assignor is not None:
            config["partition.assignment.strategy"] = assignor
            config["session.timeout.ms"] = 10_000
        consumers.append(PollingConsumer(config, topic))
    try:
        deadline = time.monotonic() + 60
        while True:
            got = [c.assignment() for c in consumers]
            owned = [tp for parts in got for tp in parts]
            if len(owned) == 6 and len(set(owned)) == 6 and all(got):
                break
            assert time.monotonic() < deadline, f"the group never settled: {got}"
            time.sleep(0.2)
        time.sleep(1.0)  # a cooperative group may still be finishing its follow-up round
        got = [c.assignment() for c in consumers]
        expected_cross = sum(
            1
            for c, parts in zip(consumers, got, strict=True)
            for _, p in parts
            if RACK_OF_BROKER[p + 1] != c.rack
        )
        settings = real.agent_settings(
            [{"group_id": group, "members": [], "topics": [topic]}],
            settings_doc(
                rack_mapping=[{"client_id": f"legacy-az-{r}-*", "rack": f"az-{r}"} for r in "abc"]
                if mapped
                else [],
            ),
        )
        key = f"consumer/{group}"
        agent = run_agent(settings)
        live = agent.wait_for(lambda r: key in r.live, timeout=60)
        real_group = agent.agent.term.real_groups[group]
        by_client = {m.client_id: sorted(m.assignment) for m in real_group.members}
        e2e_report(
            target="kafka",
            protocol=protocol,
            assignor=assignor or "server (uniform)",
            racks_known=mapped,
            live_unknown_rack=live.live[key].unknown_rack,
            members=len(real_group.members),
            live_cross_rack=live.live[key].cross_rack,
            expected_cross_rack=expected_cross,
        )
        # DescribeGroups gives what each consumer holds; the agent's judgement is the count of those
        # partitions without a replica in their member's (mapped) rack.
        assert by_client == {
            f"legacy-az-{c.rack[-1]}-1": parts for c, parts in zip(consumers, got, strict=True)
        }
        assert live.live[key].total == 6
        labels = {"kind": "consumer", "group": group}
        if not mapped:
            judged = live.live[key]
            assert (judged.cross_rack, judged.unknown_rack) == (0, 6), judged
            assert len(judged.unknown_members) == 3, judged
            assert agent.agent.metrics.get("rackplan_live_unknown_rack_partitions", labels) == 6
            agent.stop()
            return
        assert live.live[key].cross_rack == expected_cross
        plan = agent.agent.term.book.latest(key)
        if (
            protocol == "consumer"
        ):  # the broker assigns: no plan, judged against the one it would get (issue 27 §4)
            assert plan is None, "no plan for a KIP-848 group: its members ignore plans"
            assert agent.agent.metrics.get("rackplan_achievable_cross_rack_partitions", labels) == 0
        else:
            assert plan is not None and plan.locality_after.cross_rack == 0, (
                "the plan for the discovered members"
            )
        agent.stop()
    finally:
        for c in consumers:
            c.close()
