"""``python -m integration.kafka up``: says what start-up is doing, and what Ctrl-C does to the data.

The cluster is a stand-in with the launcher's shape (nodes with a folder and a process) whose
start-up moves through the launcher's phases only once the previous one was reported, so the
test needs no clock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from integration.kafka import __main__ as kafka_main
from integration.kafka.cluster import Node, StartReport
from integration.kafka.compose import ComposeCluster, NodeSpec


class Lines:
    """What ``up`` printed, and a way to wait until it printed something."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.changed = threading.Condition()

    def __call__(self, line: str) -> None:
        with self.changed:
            self.lines.append(line)
            self.changed.notify_all()

    def wait_for(self, text: str) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: any(text in line for line in self.lines), timeout=30), (
                f"never said {text!r}: {self.lines}"
            )


class FakeProcess:
    """A JVM as the launcher's :class:`Node` sees it: ``poll()`` is None while it runs."""

    def __init__(self, running: bool = True) -> None:
        self.running = running

    def poll(self) -> int | None:
        return None if self.running else 1


def process(running: bool = True) -> Any:
    return FakeProcess(running)


def node(spec: NodeSpec, folder: Path) -> Node:
    return Node(spec, folder, ports={}, properties={})


@dataclass
class FakeCluster:
    compose: ComposeCluster
    workdir: Path
    out: Lines
    nodes: dict[int, Node] = field(default_factory=dict)
    closed: bool = False

    def start(self) -> StartReport:
        for spec in self.compose.nodes:
            (self.workdir / spec.service / "data").mkdir(parents=True)
            self.nodes[spec.node_id] = node(spec, self.workdir / spec.service)
        self.out.wait_for(f"formatting storage: 0/{len(self.nodes)} nodes")
        for n in self.nodes.values():
            (n.dir / "data" / "meta.properties").write_text("")
        first = next(iter(self.nodes.values()))
        first.process = process()
        self.out.wait_for(f"starting the Kafka JVMs: 1/{len(self.nodes)}")
        for n in self.nodes.values():
            n.process = process()
        self.out.wait_for(f"{len(self.nodes)} JVMs running; waiting until every broker is registered")
        return StartReport(seconds=1.0, rss_mib=1.0, nodes=len(self.nodes), version="test")

    @property
    def brokers(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.spec.is_broker]

    def address(self, node_id: int) -> str:
        return f"127.0.0.1:{19000 + node_id}"

    @property
    def bootstrap(self) -> str:
        return ",".join(self.address(n.node_id) for n in self.brokers)

    def close(self) -> None:
        self.closed = True


def run_up(monkeypatch: pytest.MonkeyPatch, workdir: Path | None) -> tuple[list[str], FakeCluster, int]:
    out = Lines()
    made: list[FakeCluster] = []

    def cluster(compose: ComposeCluster, workdir: Path) -> FakeCluster:
        made.append(FakeCluster(compose, workdir, out))
        return made[0]

    def example(bootstrap: str, replicas: Any) -> list[str]:
        # the example printed, a broker dies: up's watch loop ends there
        next(iter(made[0].nodes.values())).process = process(running=False)
        return ["try: rackplan agent run ..."]

    monkeypatch.setattr(kafka_main, "KafkaCluster", cluster)
    monkeypatch.setattr(kafka_main, "create_example_topic", lambda bootstrap, ids: [[1, 2]])
    monkeypatch.setattr(kafka_main, "try_lines", example)
    code = kafka_main.up(workdir, out=out, poll_s=0.01)
    return out.lines, made[0], code


def test_up_says_what_start_up_does_and_keeps_the_data_of_a_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    workdir = tmp_path / "kc"
    lines, cluster, code = run_up(monkeypatch, workdir)
    text = "\n".join(lines)
    assert lines[0].startswith("starting 6 Kafka nodes") and str(workdir) in lines[0]
    for said in ("formatting storage: 0/6", "starting the Kafka JVMs: 1/6", "6 JVMs running"):
        assert said in text
    assert f"Ctrl-C stops the cluster; its data and logs stay in {workdir}." in lines
    assert "remove" not in text, "--dir keeps the data"
    assert code == 1 and "exited: see" in lines[-1]
    assert cluster.closed and (workdir / "kafka-1" / "data" / "meta.properties").exists()


def test_up_without_a_dir_says_it_removes_the_temporary_folder_and_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines, cluster, _ = run_up(monkeypatch, None)
    (note,) = [line for line in lines if line.startswith("Ctrl-C")]
    assert "removes its data and logs" in note and str(cluster.workdir) in note
    assert cluster.closed and not cluster.workdir.exists()


def test_the_phases_read_from_disk_and_processes(tmp_path: Path) -> None:
    spec = NodeSpec(service="kafka-1", node_id=1, roles=("broker",), rack="az-a", properties={})
    one = node(spec, tmp_path)
    assert kafka_main.phase({}, 6) == "laying out 6 nodes"
    assert kafka_main.phase({1: one}, 6).startswith("formatting storage: 0/1")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "meta.properties").write_text("")
    assert kafka_main.phase({1: one}, 6).startswith("formatting storage: 1/1")
    one.process = process()
    assert kafka_main.phase({1: one}, 6).startswith("1 JVMs running")
