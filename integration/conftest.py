"""Fixtures of the integration tests: the embedded multi-rack cluster and an agent running beside it.

``embedded_cluster`` is shared by the whole session (read-only tests); tests
that change the cluster (decommission, outages) take ``make_cluster`` for a
private one.  Every cluster listens on free loopback ports chosen by the mock.
"""

from __future__ import annotations

import contextlib
import gc
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import pytest

from integration.kafka.cluster import KafkaCluster
from rackplan.agent.kafka.embedded import EmbeddedCluster
from rackplan.agent.kafka.timeouts import admin_client_config, operation_timeout_s, result_timeout_s
from rackplan.agent.runtime.loop import Agent, CycleReport
from rackplan.agent.settings.sections import Settings

POLL_S = 0.3


@pytest.fixture(autouse=True)
def _logs_to_stderr() -> None:
    """Each test logs JSON to the real stderr, whatever an earlier test configured."""
    import sys

    from rackplan.agent.core.logging import configure

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
        "alerts": {
            "cross_rack_threshold": 0.25,
            "worsen_delta": 0.05,
            "cooldown_s": 0,
            "for_s": 0,
            "keep_firing_for_s": 0,
        },
        "metadata": {
            "request_timeout_s": 1.5,
            "max_attempts": 2,
            "backoff_initial_s": 0.05,
            "backoff_max_s": 0.1,
        },
        "io_timeout_s": 10,
        "log": {"format": "json", "level": "warning"},
        # any free port: agents run side by side (and beside whatever else holds the default 9464)
        "http": {"port": 0},
        **extra,
    }
    return Settings.model_validate(doc)


def range_group(group_id: str, topics: list[str], racks: str = "abc") -> dict[str, Any]:
    return {
        "group_id": group_id,
        "assignor": "range",
        "members": [{"member_id": f"{group_id}-{r}", "rack": f"az-{r}", "topics": topics} for r in racks],
    }


T = TypeVar("T")


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
        first = len(self.history)
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
        # What the cycles of this wait did: a slow or failing cycle is the usual reason (a broker down).
        seen = [
            f"{r.duration_s:.1f}s{'' if r.ok else ' failed: ' + r.error[:200]}" for r in self.history[first:]
        ]
        raise AssertionError(
            f"no matching cycle within {timeout}s; saw {len(self.history)} cycles, "
            f"{len(seen)} during this wait: {seen}"
        )

    def each_cycle(self, read: Callable[[], T]) -> dict[int, T]:
        """Per cycle report (by ``id``): what ``read`` returns on the agent's thread at the end of that cycle,
        so it belongs to that report (state read later from the test's thread may be a later cycle's)."""
        seen: dict[int, T] = {}
        put = self.agent.on_cycle
        assert put is not None

        def hook(r: CycleReport) -> None:
            seen[id(r)] = read()
            put(r)

        self.agent.on_cycle = hook
        return seen

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
        from rackplan.agent.demo.run import topic_creator

        agent = Agent(settings, create_missing_topics=None if cluster is None else topic_creator(cluster))
        r = RunningAgent(agent)
        running.append(r)
        return r

    yield start
    for r in running:
        if r.thread.is_alive():
            r.stop()


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[KafkaCluster | None]:
    """Real Apache Kafka for the whole session: the compose file's six brokers in three racks, on loopback.

    Started from Kafka's jars (``make kafka``) by :class:`integration.kafka.cluster.KafkaCluster`;
    None when ``KAFKA_BOOTSTRAP`` names an external cluster instead (then tests that
    kill brokers or reassign partitions are not run: that cluster is not ours to break).
    """
    if os.environ.get("KAFKA_BOOTSTRAP"):
        yield None
        return
    cluster = KafkaCluster()
    try:
        report = cluster.start()
        _E2E_LINES.insert(0, report.line())
        yield cluster
    finally:
        # Clients some test dropped without closing are destroyed now, while their brokers still answer:
        # a librdkafka client whose requests time out against dead brokers can abort the process.
        gc.collect()
        cluster.close()


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_cluster: KafkaCluster | None) -> str:
    """The real cluster's bootstrap: ``KAFKA_BOOTSTRAP`` or the launcher's."""
    return os.environ.get("KAFKA_BOOTSTRAP") or (kafka_cluster.bootstrap if kafka_cluster else "")


def rackplan_assign(instance: Mapping[str, Any]) -> dict[str, Any]:
    """``rackplan assign -`` on a contract instance, as a user runs it; the plan document."""
    import json
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "rackplan", "assign", "-"],
        input=json.dumps(instance),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    plan: dict[str, Any] = json.loads(r.stdout)
    return plan


@pytest.fixture
def real(target: Target) -> Target:
    """The test's target, which must be real Kafka (these scenarios are about what only Kafka does)."""
    if target.kind != "kafka":
        pytest.skip("a real-Kafka scenario (RACKPLAN_IT_TARGET=embedded runs the mock instead)")
    return target


@pytest.fixture
def launched(kafka_cluster: KafkaCluster | None) -> KafkaCluster:
    """The launcher's own cluster, for tests that kill brokers, stop racks or reassign partitions."""
    if kafka_cluster is None:
        pytest.skip("KAFKA_BOOTSTRAP names an external cluster: brokers are not ours to kill or reassign")
    for node in kafka_cluster.nodes.values():  # a test that failed half-way may have left one down
        if not node.alive:
            kafka_cluster.restart(node.node_id)
    return kafka_cluster


#: follower settings of the scenarios: short TTLs and timeouts, so that everything happens in seconds
FOLLOWER_SETTINGS: dict[str, Any] = {
    "registration_ttl_s": 4.0,
    "plan_timeout_s": 20.0,
    "agent_timeout_s": 12.0,
    "fallback_grace_s": 1.0,
    "commit_interval_s": 1.0,
    "io_timeout_s": 5.0,
}
#: the agent's side of the same: registrations expire after the followers' TTL; handovers wait this long
FOLLOWER_AGENT_SETTINGS: dict[str, Any] = {
    "registrations": {"ttl_s": 4.0},
    "followers": {"release_timeout_s": 15.0},  # above the followers' agent_timeout_s + fallback_grace_s
}

_E2E_LINES: list[str] = []


@pytest.fixture
def e2e_report(request: pytest.FixtureRequest, record_property: Callable[[str, object], None]) -> Any:
    """Counts of a scenario: recorded as properties (junit XML) and printed in the terminal summary."""

    def report(**counts: object) -> None:
        line = f"{request.node.name}: " + ", ".join(f"{k}={v}" for k, v in counts.items())
        _E2E_LINES.append(line)
        for k, v in counts.items():
            record_property(k, v)

    return report


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if _E2E_LINES:
        terminalreporter.section("rackplan end-to-end counts")
        for line in _E2E_LINES:
            terminalreporter.write_line(line)


def merged(*docs: Mapping[str, Any]) -> dict[str, Any]:
    """Settings documents merged key by key (later wins), nested objects included."""
    out: dict[str, Any] = {}
    for doc in docs:
        for k, v in doc.items():
            if isinstance(v, Mapping) and isinstance(out.get(k), dict):
                out[k] = merged(out[k], v)
            else:
                out[k] = dict(v) if isinstance(v, Mapping) else v
    return out


class Target:
    """Where a scenario runs: the embedded cluster (default) or the real cluster of ``KAFKA_BOOTSTRAP``.

    On a real cluster, shared by whoever runs the suite, every topic and group
    of a test gets a unique prefix and its topics are deleted afterwards.  The
    agent creates its own topics there (CreateTopics); on the embedded cluster
    they are created through the mock's API.
    """

    def __init__(self, cluster: EmbeddedCluster | None, bootstrap: str, prefix: str) -> None:
        self.cluster = cluster
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.kind = "embedded" if cluster is not None else "kafka"
        #: the launcher's cluster when the target is real Kafka started here (None: external or embedded)
        self.kafka: KafkaCluster | None = None
        self._created: list[str] = []

    def name(self, base: str) -> str:
        """A topic or group name of this test."""
        return f"{self.prefix}{base}"

    def embedded(self, why: str) -> EmbeddedCluster:
        """The embedded cluster, for what only it can do (the test is skipped on a real cluster)."""
        if self.cluster is None:
            pytest.skip(f"needs the embedded cluster: {why}")
        return self.cluster

    def create_topic(self, base: str, partitions: int, replication_factor: int) -> str:
        name = self.name(base)
        if self.cluster is not None:
            self.cluster.create_topic(name, partitions, replication_factor)
            return name
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.cimpl import NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(name, partitions, replication_factor)])[name].result(timeout=30)
        self._created.append(name)
        deadline = time.monotonic() + 30
        while name not in admin.list_topics(timeout=10).topics:
            assert time.monotonic() < deadline, f"topic {name} never appeared"
            time.sleep(0.1)
        return name

    @property
    def control_topics(self) -> dict[str, str]:
        return {
            "plan_topic": self.name("_rackplan.plans"),
            "alerts_topic": self.name("_rackplan.alerts"),
            "registrations_topic": self.name("_rackplan.registrations"),
            "lease_topic": self.name("_rackplan.lease"),
            "traffic_topic": self.name("_rackplan.traffic"),
        }

    def agent_doc(self, *extra: Mapping[str, Any]) -> dict[str, Any]:
        """The agent's settings for this target (topic and group names), then ``extra``."""
        t = self.control_topics
        base = {
            "kafka": {"bootstrap_servers": self.bootstrap},
            "plan_topic": t["plan_topic"],
            "alerts_topic": t["alerts_topic"],
            "registrations_topic": t["registrations_topic"],
            # the brokers read the default _rackplan.traffic: a test's own name keeps other tests' feeds off it
            "traffic_topic": t["traffic_topic"],
            "ha": {"lease_topic": t["lease_topic"], "group_id": self.name("rackplan-agents")},
        }
        return merged(base, *extra)

    def agent_settings(self, groups: list[dict[str, Any]], *extra: Mapping[str, Any]) -> Settings:
        """What :func:`agent_settings` gives, on this target."""
        doc = agent_settings(self.bootstrap, groups).model_dump(mode="json")
        if self.kind == "kafka":
            # Admin requests that time out while a broker dies can trip an assertion in librdkafka 2.16
            # (rd_kafka_enq_once_del_source_return: the process aborts): on real brokers, the agent's
            # default-sized timeout, not the embedded suite's 1.5 s.
            doc = merged(doc, {"metadata": {"request_timeout_s": 10.0, "max_attempts": 3}})
        return Settings.model_validate(merged(doc, self.agent_doc(*extra)))

    def follower_settings(self, *extra: Mapping[str, Any]) -> dict[str, Any]:
        t = self.control_topics
        return merged(
            FOLLOWER_SETTINGS,
            {k: t[k] for k in ("plan_topic", "registrations_topic", "lease_topic")},
            *extra,
        )

    def _launched(self, what: str) -> KafkaCluster:
        if self.kafka is None:
            pytest.skip(
                f"{what}: KAFKA_BOOTSTRAP names an external cluster, whose brokers are not ours to touch"
            )
        return self.kafka

    def stop_broker(self, broker: int) -> None:
        """A broker outage: the mock refuses connections; real Kafka's broker is killed (-9)."""
        if self.cluster is not None:
            self.cluster.set_down(broker)
        else:
            self._launched("stopping a broker").kill(broker)

    def start_broker(self, broker: int) -> None:
        if self.cluster is not None:
            self.cluster.set_up(broker)
        else:
            self._launched("restarting a broker").restart(broker)

    def move_off(self, broker: int, topics: list[str]) -> dict[tuple[str, int], list[int]]:
        """Every replica of ``topics`` on ``broker`` moves to a broker of another rack (a decommission).

        The mock's own decommission on the embedded cluster; Kafka's ReassignPartitionsCommand on real
        Kafka, each replica going to the lowest-numbered broker of another rack not already holding one.
        Returns the real moves (empty on the embedded cluster, which chooses its own).
        """
        if self.cluster is not None:
            self.cluster.decommission(broker)
            return {}
        kafka = self._launched("a reassignment")
        from confluent_kafka.admin import AdminClient

        racks = kafka.racks()
        md = AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=10)
        moves: dict[tuple[str, int], list[int]] = {}
        for t in topics:
            for p, pm in sorted(md.topics[t].partitions.items()):
                if broker not in pm.replicas:
                    continue
                spare = [b for b in sorted(racks) if b not in pm.replicas and racks[b] != racks[broker]]
                moves[(t, p)] = [spare[0] if b == broker else b for b in pm.replicas]
        kafka.reassign(moves)
        return moves

    def create_agent_topics(self) -> None:
        """For agents in other processes on the embedded cluster (they cannot reach the mock's API)."""
        if self.cluster is not None:
            for name in self.control_topics.values():
                self.cluster.create_topic(name, 1, 3)

    def cleanup(self) -> None:
        if self.cluster is not None:
            return
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(admin_client_config({"bootstrap.servers": self.bootstrap}, 20))
        existing = admin.list_topics(timeout=10).topics
        # Each name once: confluent-kafka 2.16 crashes (SIGSEGV) on a DeleteTopics naming a topic twice.
        names = sorted({n for n in [*self._created, *self.control_topics.values()] if n in existing})
        if names:
            for f in admin.delete_topics(names, request_timeout=operation_timeout_s(20)).values():
                with contextlib.suppress(Exception):  # best effort: a leftover topic has a unique name
                    f.result(timeout=result_timeout_s(20))


#: ``RACKPLAN_IT_TARGET=embedded`` runs the target-based scenarios on librdkafka's mock instead (no JVM)
IT_TARGET = os.environ.get("RACKPLAN_IT_TARGET", "kafka")


@pytest.fixture
def target(request: pytest.FixtureRequest, make_cluster: Callable[..., EmbeddedCluster]) -> Iterator[Target]:
    """Real Kafka (the session's cluster, every name prefixed per test); the embedded cluster on request."""
    if IT_TARGET == "embedded":
        c = make_cluster()
        t = Target(c, c.bootstrap_servers, prefix="")
    else:
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        t = Target(None, bootstrap, prefix=f"rp-{uuid.uuid4().hex[:8]}-")
        t.kafka = request.getfixturevalue("kafka_cluster")
    yield t
    t.cleanup()
