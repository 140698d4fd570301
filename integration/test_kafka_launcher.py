"""The launcher on the real cluster: readiness from what brokers answer, restarts from any thread, quiet logs.

``make test`` once failed after a broker restart with "cluster not ready after 120 s"
while all six brokers served: readiness needed "Kafka Server started" in every
node's current log file, and the server-side assignor's admin client had rolled
those logs over (thousands of "Rebootstrapping" lines a second while brokers were
unreachable).  And a node restarted from a thread that then ended was SIGKILLed
(``PR_SET_PDEATHSIG`` follows the forking thread).
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from integration.kafka.cluster import CLIENTS_JAR, KafkaCluster, Node


def roll_over(node: Node) -> None:
    """What a size-based rollover does to the current log: its old lines (the start line) are gone."""
    if node.log.exists():
        kept = node.dir / f"server.log.before-{time.monotonic_ns()}"
        shutil.copyfile(node.log, kept)
        node.log.write_bytes(b"")  # log4j appends: new lines continue in the emptied file


def test_a_broker_restarted_from_a_short_lived_thread_is_ready_and_stays_up(
    launched: KafkaCluster, e2e_report: Callable[..., None]
) -> None:
    cluster = launched
    victim = max(n.node_id for n in cluster.brokers if not n.spec.is_controller)
    for node in cluster.nodes.values():
        roll_over(node)
    cluster.kill(victim)
    outcome: dict[str, object] = {}

    def restart() -> None:
        outcome["tid"] = threading.get_native_id()
        t0 = time.monotonic()
        try:
            cluster.restart(victim, timeout=120)
        except Exception as e:
            outcome["error"] = e
        outcome["seconds"] = time.monotonic() - t0

    t = threading.Thread(target=restart, name="short-lived-restarter")
    t.start()
    t.join(180)
    assert not t.is_alive()
    assert "error" not in outcome, f"restart failed: {outcome.get('error')}"
    # The restarting thread is gone from the kernel: a death signal tied to it would have been sent.
    task = Path(f"/proc/self/task/{outcome['tid']}")
    deadline = time.monotonic() + 20
    while task.exists():
        assert time.monotonic() < deadline, "the restarting thread never exited"
        time.sleep(0.05)
    node = cluster.nodes[victim]
    assert node.process is not None
    with pytest.raises(subprocess.TimeoutExpired):
        node.process.wait(timeout=2)  # still running after its restarter ended
    assert victim in cluster.live_brokers()
    e2e_report(broker=victim, restart_ready_s=round(float(str(outcome["seconds"])), 1))


def test_the_server_side_assignor_keeps_broker_logs_quiet(
    launched: KafkaCluster, e2e_report: Callable[..., None]
) -> None:
    # Its clients start inside each broker before any broker listens, and meet every restart of the suite.
    if not CLIENTS_JAR.exists():
        pytest.skip("the server-side assignor is not on the brokers' classpath (make clients)")
    counts = {}
    for node in launched.brokers:
        lines = [
            line
            for path in sorted(node.dir.glob("server.log*"))
            for line in path.read_text(errors="replace").splitlines()
            if "clientId=rackplan-server-assignor" in line
        ]
        rebootstraps = sum("Rebootstrapping" in line for line in lines)
        assert rebootstraps == 0, (
            f"{node.spec.service}: {rebootstraps} rebootstraps of the assignor's clients"
        )
        counts[node.spec.service] = len(lines)
    e2e_report(assignor_client_log_lines_max=max(counts.values()))
