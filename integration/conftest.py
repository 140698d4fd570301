"""Fixtures of the integration tests: the embedded multi-rack cluster and an agent running beside it.

``embedded_cluster`` is shared by the whole session (read-only tests); tests
that change the cluster (decommission, outages) take ``make_cluster`` for a
private one.  Every cluster listens on free loopback ports chosen by the mock.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent.embedded import EmbeddedCluster
from agent.loop import Agent, CycleReport
from agent.settings import Settings

POLL_S = 0.3


@pytest.fixture(autouse=True)
def _logs_to_stderr() -> None:
    """Each test logs JSON to the real stderr, whatever an earlier test configured."""
    import sys

    from agent.logging import configure

    configure("json", "warning", stream=sys.__stderr__)


@pytest.fixture(scope="session")
def embedded_cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(brokers_per_rack=2, racks=3) as cluster:
        cluster.create_topic("orders", 12, 2)
        yield cluster


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., EmbeddedCluster]]:
    made: list[EmbeddedCluster] = []

    def make(brokers_per_rack: int = 2, racks: int = 3) -> EmbeddedCluster:
        c = EmbeddedCluster(brokers_per_rack=brokers_per_rack, racks=racks)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def agent_settings(bootstrap: str, groups: list[dict[str, Any]], **extra: Any) -> Settings:
    doc: dict[str, Any] = {
        "kafka": {"bootstrap_servers": bootstrap},
        "poll_interval_s": POLL_S,
        "change_persist_polls": 2,
        "consumer_groups": groups,
        "alerts": {"cross_rack_threshold": 0.25, "worsen_delta": 0.05, "cooldown_s": 0},
        "metadata": {
            "request_timeout_s": 1.5,
            "max_attempts": 2,
            "backoff_initial_s": 0.05,
            "backoff_max_s": 0.1,
        },
        "io_timeout_s": 10,
        "log": {"format": "json", "level": "warning"},
        **extra,
    }
    return Settings.model_validate(doc)


def range_group(group_id: str, topics: list[str], racks: str = "abc") -> dict[str, Any]:
    return {
        "group_id": group_id,
        "assignor": "range",
        "members": [{"member_id": f"{group_id}-{r}", "rack": f"az-{r}", "topics": topics} for r in racks],
    }


class RunningAgent:
    """An agent on a thread; its cycle reports arrive on a queue."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.reports: queue.Queue[CycleReport] = queue.Queue()
        self.history: list[CycleReport] = []
        agent.on_cycle = self.reports.put
        self.error: BaseException | None = None
        self.exit_code: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.exit_code = self.agent.run()
        except BaseException as e:
            self.error = e

    def wait_for(self, pred: Callable[[CycleReport], bool], timeout: float = 15.0) -> CycleReport:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.error is not None:
                raise AssertionError(f"agent crashed: {self.error!r}")
            try:
                r = self.reports.get(timeout=0.1)
            except queue.Empty:
                continue
            self.history.append(r)
            if pred(r):
                return r
        raise AssertionError(f"no matching cycle within {timeout}s; saw {len(self.history)} cycles")

    def stop(self) -> int | None:
        self.agent.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), "agent did not stop"
        if self.error is not None:
            raise self.error
        return self.exit_code


@pytest.fixture
def run_agent() -> Iterator[Callable[..., RunningAgent]]:
    running: list[RunningAgent] = []

    def start(settings: Settings, cluster: EmbeddedCluster | None = None) -> RunningAgent:
        from agent.demo import topic_creator

        agent = Agent(settings, create_missing_topics=None if cluster is None else topic_creator(cluster))
        r = RunningAgent(agent)
        running.append(r)
        return r

    yield start
    for r in running:
        if r.thread.is_alive():
            r.stop()


@pytest.fixture
def kafka_bootstrap() -> str:
    """A real Kafka cluster for what the mock lacks (CreateTopics, DescribeConfigs, DescribeGroups)."""
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP")
    if not bootstrap:
        pytest.skip(
            "needs a real Kafka cluster: set KAFKA_BOOTSTRAP=host:port "
            "(the mock lacks CreateTopics, DescribeConfigs and DescribeGroups)"
        )
    return bootstrap
