"""A real multi-rack KRaft cluster on loopback, from Kafka's own jars (``make kafka``).

Every node's properties come from ``docker-compose.yml``
(:mod:`integration.kafka.compose`); the launcher replaces only what one machine
needs replaced (listener hosts and ports, the quorum's addresses, data
directories) and adds the few test settings in :data:`TEST_OVERRIDES`, each
with its reason.  Nodes run as ``java -cp 'lib/*' kafka.Kafka server.properties``
after ``kafka.tools.StorageTool format``; each logs to ``<workdir>/<service>/server.log``.

It can kill -9 and restart a node, stop and start a whole rack, run a real
partition reassignment (Kafka's ``ReassignPartitionsCommand``) and a preferred
leader election (Kafka's ``LeaderElectionCommand``), and tear everything down.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from integration.kafka.compose import ComposeCluster, NodeSpec, listener_names, load_compose
from integration.kafka.readiness import judge
from integration.kafka.spawn import spawn

KAFKA_DIR = Path(__file__).resolve().parent
LIB = KAFKA_DIR / "lib"
POM = KAFKA_DIR / "pom.xml"

#: Settings the launcher adds to the compose file's, each for a reason of a test machine.
TEST_OVERRIDES: Mapping[str, str] = {
    # 50 partitions x RF 3 of each internal topic is most of a cold start on 2 cores.
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.num.partitions": "6",
    # A killed broker is fenced after this, not after 9 s: outage tests see it quickly.
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "4000",
    # Six JVMs share 2 cores and modest heaps: fewer threads, a small cleaner buffer.
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "log.cleaner.dedupe.buffer.size": "16777216",
    # Replicas catch up without waiting for a full fetch wait on an idle cluster.
    "replica.fetch.wait.max.ms": "100",
}

#: rackplan's JVM jar (``make clients``): on the brokers' classpath when built, so that KIP-848 groups
#: can choose its server-side assignor (``group.remote.assignor=rackplan``; docs/java.md).
CLIENTS_JAR = KAFKA_DIR.parents[1] / "clients" / "java" / "target" / "rackplan-clients.jar"
#: Kafka's built-in server-side assignors stay first (``uniform`` remains the default), rackplan's is added.
RACKPLAN_ASSIGNORS = "uniform,range,dev.rackplan.kafka.RackplanServerAssignor"
#: Streams groups (KIP-1071, Kafka 4.4's KIP-1357): Kafka's ``sticky`` stays the default, rackplan's is added;
#: a group chooses it with the group config ``streams.assignor.name=rackplan``.
RACKPLAN_STREAMS_ASSIGNORS = "sticky,dev.rackplan.kafka.streams.RackplanStreamsTaskAssignor"
#: The tests' plan topics are prefixed per test: the broker-side assignor reads every one of them.
RACKPLAN_PLAN_TOPIC_PATTERN = r".*_rackplan\.plans"

JVM_OPTS: tuple[str, ...] = (
    "-XX:+UseSerialGC",  # one GC thread: six JVMs on two cores
    "-XX:TieredStopAtLevel=1",  # C1 only: a third of the start-up CPU, ample for test traffic
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
)

_LOG4J2 = """Configuration:
  Appenders:
    RollingFile:
      name: F
      fileName: "{log}"
      filePattern: "{log}.%i"
      PatternLayout: {{pattern: "[%d] %p %m (%c)%n"}}
      Policies: {{SizeBasedTriggeringPolicy: {{size: 20MB}}}}
      DefaultRolloverStrategy: {{max: 2}}
  Loggers:
    Root: {{level: INFO, AppenderRef: [{{ref: F}}]}}
    Logger:
      - {{name: kafka.request.logger, level: WARN}}
      - {{name: org.apache.kafka.controller, level: INFO}}
"""


class LauncherError(RuntimeError):
    """The cluster could not be started or driven; the message says what to do."""


def free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports (held open together so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def java_classpath() -> str:
    if not LIB.is_dir() or not any(LIB.glob("kafka_2.13-*.jar")):
        raise LauncherError(
            f"Kafka's jars are not in {LIB}: run `make kafka` (Maven resolves them from {POM})"
        )
    return str(LIB / "*")


def broker_classpath() -> str:
    """Kafka's jars, and rackplan's when built (its server-side assignor)."""
    cp = java_classpath()
    return f"{cp}:{CLIENTS_JAR}" if CLIENTS_JAR.exists() else cp


def kafka_version() -> str:
    """The version of the jars in lib/ (the pom's ``kafka.version``)."""
    (jar,) = LIB.glob("kafka_2.13-*.jar")
    return jar.name.removeprefix("kafka_2.13-").removesuffix(".jar")


def run_tool(main_class: str, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """One of Kafka's command-line tools, by class, on the launcher's classpath."""
    cmd = ["java", "-Xmx256m", *JVM_OPTS, "-cp", broker_classpath(), main_class, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def format_storage(cluster_id: str, properties: Path) -> None:
    """Kafka's StorageTool: also the first check of the properties (KafkaConfig parses them)."""
    r = run_tool(
        "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(properties), "--ignore-formatted"
    )
    if r.returncode != 0:
        lines = (r.stderr or r.stdout).strip().splitlines()
        # The exception's own line says what is wrong; the stack under it does not.
        cause = [x.strip() for x in lines if ("Exception" in x or "Error" in x) and not x.startswith("\tat ")]
        raise LauncherError(f"kafka-storage format rejected {properties}: {(cause or lines[-1:])[0]}")


@dataclass
class Node:
    """One running (or stopped) Kafka process."""

    spec: NodeSpec
    dir: Path
    ports: dict[str, int]
    properties: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def node_id(self) -> int:
        return self.spec.node_id

    @property
    def log(self) -> Path:
        return self.dir / "server.log"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def rss_kib(self) -> int:
        if not self.alive or self.process is None:
            return 0
        try:
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except OSError:
            return 0
        return 0


@dataclass
class StartReport:
    seconds: float
    rss_mib: float
    nodes: int
    version: str

    def line(self) -> str:
        return (
            f"real Kafka {self.version}: {self.nodes} nodes ready in {self.seconds:.1f} s, "
            f"{self.rss_mib:.0f} MiB RSS in total"
        )


@dataclass
class KafkaCluster:
    """The compose file's cluster on loopback.  Use as a context manager, or ``start()`` / ``close()``.

    ``bootstrap`` lists every broker's EXTERNAL listener (the one clients use).
    """

    compose: ComposeCluster = field(default_factory=load_compose)
    workdir: Path | None = None
    heap_mb: int = 320
    overrides: Mapping[str, str] = field(default_factory=lambda: dict(TEST_OVERRIDES))
    client_listener: str = "EXTERNAL"
    #: librdkafka settings the launcher's own clients need besides the bootstrap (a secured cluster's SASL)
    client_config: Mapping[str, str] = field(default_factory=dict)
    nodes: dict[int, Node] = field(default_factory=dict, init=False)
    report: StartReport | None = field(default=None, init=False)
    _own_dir: bool = field(default=False, init=False)

    # -- lifecycle -----------------------------------------------------------------------------------

    def __enter__(self) -> KafkaCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, timeout: float = 180.0) -> StartReport:
        t0 = time.monotonic()
        classpath = broker_classpath()
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="rackplan-kafka-"))
            self._own_dir = True
        self.workdir.mkdir(parents=True, exist_ok=True)
        atexit.register(self.close)
        self._lay_out()
        for node in self.nodes.values():
            format_storage(self.compose.cluster_id, node.dir / "server.properties")
        for node in self.nodes.values():
            self._spawn(node, classpath)
        self.wait_ready(timeout=timeout)
        self.report = StartReport(
            seconds=time.monotonic() - t0,
            rss_mib=sum(n.rss_kib() for n in self.nodes.values()) / 1024,
            nodes=len(self.nodes),
            version=kafka_version(),
        )
        return self.report

    def close(self) -> None:
        for node in self.nodes.values():
            if node.alive and node.process is not None:
                node.process.terminate()
        deadline = time.monotonic() + 15
        for node in self.nodes.values():
            if node.process is None:
                continue
            try:
                node.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait(timeout=10)
            node.process = None
        if self._own_dir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self._own_dir = False
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)

    # -- layout --------------------------------------------------------------------------------------

    def _lay_out(self) -> None:
        assert self.workdir is not None
        names = {n.node_id: listener_names(n.properties.get("listeners", "")) for n in self.compose.nodes}
        wanted = sum(len(v) for v in names.values())
        ports = iter(free_ports(wanted))
        for spec in self.compose.nodes:
            node_ports = {name: next(ports) for name in names[spec.node_id]}
            self.nodes[spec.node_id] = Node(spec, self.workdir / spec.service, node_ports, {})
        controllers = [n for n in self.nodes.values() if n.spec.is_controller]
        controller_name = self._controller_listener()
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.ports[controller_name]}" for n in controllers)
        for node in self.nodes.values():
            props = dict(node.spec.properties)
            props["listeners"] = ",".join(f"{name}://127.0.0.1:{port}" for name, port in node.ports.items())
            if "advertised.listeners" in props:
                adv = listener_names(props["advertised.listeners"])
                props["advertised.listeners"] = ",".join(
                    f"{name}://127.0.0.1:{node.ports[name]}" for name in adv
                )
            props["controller.quorum.voters"] = voters
            props["log.dirs"] = str(node.dir / "data")
            props.update(self.overrides)
            if CLIENTS_JAR.exists() and node.spec.is_broker:
                props["group.consumer.assignors"] = RACKPLAN_ASSIGNORS
                props["rackplan.bootstrap.servers"] = ",".join(
                    f"127.0.0.1:{n.ports[self.client_listener]}"
                    for n in self.nodes.values()
                    if n.spec.is_broker
                )
                props["rackplan.plan.topic.pattern"] = RACKPLAN_PLAN_TOPIC_PATTERN
                props["group.streams.assignors"] = RACKPLAN_STREAMS_ASSIGNORS
                props["rackplan.streams.refresh.ms"] = "2000"  # the Streams catalog's refresh (10 s default)
            node.properties = props
            node.dir.mkdir(parents=True, exist_ok=True)
            (node.dir / "server.properties").write_text(
                "".join(f"{k}={v}\n" for k, v in sorted(props.items()))
            )
            (node.dir / "log4j2.yaml").write_text(_LOG4J2.format(log=node.log))

    def _controller_listener(self) -> str:
        names = {n.properties.get("controller.listener.names", "CONTROLLER") for n in self.compose.nodes}
        if len(names) != 1:
            raise LauncherError(f"controller.listener.names differs between nodes: {sorted(names)}")
        return names.pop().split(",")[0]

    def _spawn(self, node: Node, classpath: str | None = None) -> None:
        cmd = [
            "java",
            "-Xms64m",
            f"-Xmx{self.heap_mb}m",
            *JVM_OPTS,
            f"-Dlog4j2.configurationFile={node.dir / 'log4j2.yaml'}",
            "-cp",
            classpath or broker_classpath(),
            "kafka.Kafka",
            str(node.dir / "server.properties"),
        ]
        out = (node.dir / "stdout.log").open("ab")
        # Forked by the spawner thread: dies with the suite (even one that crashed: run_suite.sh), not with
        # the thread that restarted it (integration/kafka/spawn.py).
        node.process = spawn(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        out.close()
        node.starts += 1

    # -- addresses -----------------------------------------------------------------------------------

    @property
    def brokers(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.spec.is_broker]

    def address(self, node_id: int) -> str:
        return f"127.0.0.1:{self.nodes[node_id].ports[self.client_listener]}"

    @property
    def bootstrap(self) -> str:
        return ",".join(self.address(n.node_id) for n in self.brokers)

    def racks(self) -> dict[int, str | None]:
        return {n.node_id: n.spec.rack for n in self.brokers}

    def rack_brokers(self, rack: str) -> list[int]:
        return [n.node_id for n in self.brokers if n.spec.rack == rack]

    # -- readiness -----------------------------------------------------------------------------------

    def live_brokers(self, timeout: float = 5.0) -> set[int]:
        """Broker ids the cluster's metadata lists now (what clients see)."""
        from confluent_kafka.admin import AdminClient

        live = [n for n in self.brokers if n.alive]
        if not live:
            return set()
        admin = AdminClient(
            {
                **self.client_config,
                "bootstrap.servers": ",".join(self.address(n.node_id) for n in live),
                "log_level": 0,
            }
        )
        try:
            md = admin.list_topics(timeout=timeout)
        except Exception:
            return set()
        return set(md.brokers)

    def wait_ready(self, timeout: float = 180.0, expect: Iterable[int] | None = None) -> None:
        """Until the cluster answers as ready (:mod:`integration.kafka.readiness`), never judged from log text.

        Every running node serves requests (``ApiVersions``), every expected broker is registered and
        unfenced (Metadata), every partition of the internal topics has a leader.
        """
        want = set(expect) if expect is not None else {n.node_id for n in self.brokers if n.alive}
        deadline = time.monotonic() + timeout
        made: list[Any] = []

        def admin() -> Any:
            if not made:
                made.append(self._admin([n for n in self.brokers if n.alive]))
            return made[0]

        while True:
            dead = [n for n in self.nodes.values() if n.process is not None and n.process.poll() is not None]
            if dead:
                n = dead[0]
                raise LauncherError(
                    f"{n.spec.service} exited with {n.process.returncode if n.process else '?'}: {self._tail(n)}"
                )
            listeners = {
                n.spec.service: ("127.0.0.1", self._serving_port(n)) for n in self.nodes.values() if n.alive
            }
            state = judge(admin, listeners, want, timeout=max(0.5, min(5.0, deadline - time.monotonic())))
            if state.ready:
                return
            if time.monotonic() > deadline:
                raise LauncherError(
                    f"cluster not ready after {timeout:.0f} s: {'; '.join(state.why_not)} "
                    f"(brokers registered: {sorted(state.brokers)})"
                )
            time.sleep(0.25)

    def _admin(self, brokers: Sequence[Node]) -> Any:
        """A quiet AdminClient on ``brokers`` that retries refused connections every second at most."""
        from confluent_kafka.admin import AdminClient

        return AdminClient(
            {
                **self.client_config,
                "bootstrap.servers": ",".join(self.address(n.node_id) for n in brokers),
                "reconnect.backoff.max.ms": 1000,
                "log_level": 0,
            }
        )

    def _serving_port(self, node: Node) -> int:
        """Where a node serves requests: a broker on the clients' listener, a controller on its own."""
        return node.ports[self.client_listener if node.spec.is_broker else self._controller_listener()]

    @staticmethod
    def _tail(node: Node, lines: int = 5) -> str:
        for path in (node.log, node.dir / "stdout.log"):
            if path.exists():
                text = path.read_text(errors="replace").strip().splitlines()
                errors = [line for line in text if " ERROR " in line or "Exception" in line]
                return " | ".join((errors or text)[-lines:])
        return "(no log)"

    # -- faults --------------------------------------------------------------------------------------

    def kill(self, node_id: int) -> None:
        """kill -9: no controlled shutdown, as a crashed machine."""
        node = self.nodes[node_id]
        if node.process is not None and node.alive:
            os.killpg(node.process.pid, signal.SIGKILL)
            node.process.wait(timeout=30)
        node.process = None

    def stop(self, node_id: int, timeout: float = 60.0) -> None:
        """SIGTERM: a controlled shutdown (leadership moves away first)."""
        node = self.nodes[node_id]
        if node.process is not None and node.alive:
            node.process.terminate()
            try:
                node.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill(node_id)
        node.process = None

    def restart(self, node_id: int, timeout: float = 120.0) -> None:
        """Start a stopped node again on its ports and data; returns when it is registered."""
        node = self.nodes[node_id]
        if node.alive:
            return
        self._spawn(node)
        expect = [node_id] if node.spec.is_broker else []
        self.wait_ready(timeout=timeout, expect=expect)

    def stop_rack(self, rack: str, hard: bool = True) -> list[int]:
        """Every node of a rack (kill -9 when ``hard``); returns their ids."""
        ids = [n.node_id for n in self.nodes.values() if n.spec.rack == rack]
        for node_id in ids:
            (self.kill if hard else self.stop)(node_id)
        return ids

    def start_rack(self, rack: str, timeout: float = 120.0) -> None:
        ids = [n.node_id for n in self.nodes.values() if n.spec.rack == rack and not n.alive]
        for node_id in ids:
            self._spawn(self.nodes[node_id])
        self.wait_ready(timeout=timeout, expect=[i for i in ids if self.nodes[i].spec.is_broker])

    # -- operations with Kafka's own tools -----------------------------------------------------------

    def reassign(
        self,
        moves: Mapping[tuple[str, int], Sequence[int]],
        wait: bool = True,
        timeout: float = 120.0,
        throttle_bytes: int | None = None,
    ) -> None:
        """A partition reassignment with Kafka's ``ReassignPartitionsCommand`` (kafka-reassign-partitions)."""
        assert self.workdir is not None
        plan = {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(moves.items())
            ],
        }
        path = self.workdir / f"reassign-{time.monotonic_ns()}.json"
        path.write_text(json.dumps(plan))
        args = ["--bootstrap-server", self.bootstrap, "--reassignment-json-file", str(path)]
        extra = ["--throttle", str(throttle_bytes)] if throttle_bytes is not None else []
        r = run_tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand", *args, "--execute", *extra)
        if r.returncode != 0 or "Successfully started" not in r.stdout:
            raise LauncherError(f"reassignment not started: {(r.stderr or r.stdout).strip()[-400:]}")
        if not wait:
            return
        deadline = time.monotonic() + timeout
        if throttle_bytes is None:
            # Complete once the metadata shows exactly the target replicas, all in sync (while it moves, a
            # partition lists the old and the new ones): read with one admin client, not a JVM per check
            # (the tool's --verify takes seconds to start on a loaded machine, and tests time the wait).
            self._await_replicas(moves, deadline)
            return
        while True:  # --verify also removes the throttle once the move is complete
            v = run_tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand", *args, "--verify")
            if v.returncode == 0 and "is still in progress" not in v.stdout and "is complete" in v.stdout:
                return
            if time.monotonic() > deadline:
                raise LauncherError(
                    f"reassignment not complete after {timeout:.0f} s: {v.stdout.strip()[-400:]}"
                )
            time.sleep(0.5)

    def _await_replicas(self, moves: Mapping[tuple[str, int], Sequence[int]], deadline: float) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        left: dict[tuple[str, int], list[int]] = {tp: list(r) for tp, r in moves.items()}
        while True:
            with contextlib.suppress(Exception):  # a broker restarting: asked again
                md = admin.list_topics(timeout=10).topics
                for (t, p), want in list(left.items()):
                    pm = md[t].partitions[p] if t in md and p in md[t].partitions else None
                    if pm is not None and list(pm.replicas) == want and sorted(pm.isrs) == sorted(want):
                        del left[(t, p)]
            if not left:
                return
            if time.monotonic() > deadline:
                raise LauncherError(f"reassignment not complete: {sorted(left)} still moving")
            time.sleep(0.2)

    def elect_preferred_leaders(self, partitions: Iterable[tuple[str, int]] | None = None) -> str:
        """A preferred leader election with Kafka's ``LeaderElectionCommand`` (kafka-leader-election)."""
        args = ["--bootstrap-server", self.bootstrap, "--election-type", "PREFERRED"]
        if partitions is None:
            args.append("--all-topic-partitions")
        else:
            assert self.workdir is not None
            path = self.workdir / f"elect-{time.monotonic_ns()}.json"
            path.write_text(
                json.dumps({"partitions": [{"topic": t, "partition": p} for t, p in sorted(partitions)]})
            )
            args += ["--path-to-json-file", str(path)]
        r = run_tool("org.apache.kafka.tools.LeaderElectionCommand", *args)
        if r.returncode != 0:
            raise LauncherError(f"leader election failed: {(r.stderr or r.stdout).strip()[-400:]}")
        return r.stdout
