"""``python -m integration.kafka up [--dir DIR]``: the compose file's cluster on loopback, until Ctrl-C.

Starting six Kafka JVMs takes minutes on a loaded machine (about 140 s seen): one ``kafka-storage
format`` JVM per node, then the nodes, then the wait until every broker is registered and the
internal topics have leaders. So ``up`` says which of those it is in while it waits, and where the
data and logs are: kept after Ctrl-C with ``--dir``, removed with the temporary folder without it.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from integration.kafka.cluster import KafkaCluster, LauncherError, StartReport
from integration.kafka.compose import COMPOSE_FILE, ComposeError, load_compose
from integration.kafka.example import create_example_topic, try_lines

#: seconds between two progress lines that say the same
REPEAT_S = 15.0


class NodeLike(Protocol):
    @property
    def dir(self) -> Path: ...
    @property
    def process(self) -> Any: ...


def phase(nodes: Mapping[int, NodeLike], expected: int) -> str:
    """What start-up is doing now, read from what it has left on disk and in processes."""
    if not nodes:
        return f"laying out {expected} nodes"
    formatted = sum((n.dir / "data" / "meta.properties").exists() for n in nodes.values())
    spawned = sum(n.process is not None for n in nodes.values())
    if spawned == 0:
        return f"formatting storage: {formatted}/{len(nodes)} nodes (one kafka-storage JVM each)"
    if spawned < len(nodes):
        return f"starting the Kafka JVMs: {spawned}/{len(nodes)}"
    return f"{spawned} JVMs running; waiting until every broker is registered and the internal topics have leaders"


def where(workdir: Path, kept: bool) -> str:
    """What becomes of the data and logs on Ctrl-C."""
    if kept:
        return f"Ctrl-C stops the cluster; its data and logs stay in {workdir}."
    return f"Ctrl-C stops the cluster and removes its data and logs ({workdir}: a temporary folder; --dir keeps them)."


def start_with_progress(
    cluster: KafkaCluster,
    out: Callable[[str], None],
    stopping: Callable[[], bool],
    poll_s: float = 2.0,
) -> StartReport:
    """``cluster.start()`` in a thread; every change of :func:`phase` (or every REPEAT_S) printed meanwhile.

    Ctrl-C during start-up is honoured once start-up returns: closing a cluster whose JVMs are still
    being spawned could leave one running.
    """
    result: list[StartReport | BaseException] = []

    def run() -> None:
        try:
            result.append(cluster.start())
        except BaseException as e:  # handed to the caller's thread
            result.append(e)

    thread = threading.Thread(target=run, name="kafka-start", daemon=True)
    t0 = time.monotonic()
    thread.start()
    said, said_at, told_stop = "", 0.0, False
    while thread.is_alive():
        thread.join(poll_s)
        if not thread.is_alive():
            break
        now = time.monotonic()
        what = phase(cluster.nodes, len(cluster.compose.nodes))
        if what != said or now - said_at >= REPEAT_S:
            out(f"  [{now - t0:5.0f} s] {what}")
            said, said_at = what, now
        if stopping() and not told_stop:
            out("  stopping once start-up returns (JVMs are still being started)")
            told_stop = True
    (outcome,) = result
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def up(
    workdir: Path | None,
    compose_file: Path = COMPOSE_FILE,
    out: Callable[[str], None] = lambda line: print(line, flush=True),
    poll_s: float = 2.0,
) -> int:
    """Start the cluster saying what it does, print its brokers, bootstrap and example; run until a signal."""
    kept = workdir is not None
    folder = workdir if workdir is not None else Path(tempfile.mkdtemp(prefix="rackplan-kafka-"))
    cluster = KafkaCluster(compose=load_compose(compose_file), workdir=folder)
    stop = threading.Event()
    previous = {
        s: signal.signal(s, lambda _signum, _frame: stop.set()) for s in (signal.SIGTERM, signal.SIGINT)
    }
    out(f"starting {len(cluster.compose.nodes)} Kafka nodes from {compose_file}; data and logs in {folder}")
    try:
        report = start_with_progress(cluster, out, stop.is_set, poll_s)
        out(report.line())
        for n in cluster.brokers:
            out(f"  broker {n.node_id} rack={n.spec.rack} {cluster.address(n.node_id)}  log {n.log}")
        out(f"bootstrap: {cluster.bootstrap}")
        if not stop.is_set():
            replicas = create_example_topic(cluster.bootstrap, [n.node_id for n in cluster.brokers])
            for line in try_lines(cluster.bootstrap, replicas):
                out(line)
            out(where(folder, kept))
        while not stop.wait(poll_s):
            dead = [n for n in cluster.nodes.values() if n.process is not None and not n.alive]
            if dead:
                out(f"{dead[0].spec.service} exited: see {dead[0].log}")
                return 1
        return 0
    finally:
        cluster.close()
        if not kept:
            shutil.rmtree(folder, ignore_errors=True)
        for s, h in previous.items():
            signal.signal(s, h)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m integration.kafka", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("up", help="start the cluster, print its bootstrap, stop on Ctrl-C")
    cmd.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="data and logs here, kept after Ctrl-C (default: a temporary folder, removed on Ctrl-C)",
    )
    cmd.add_argument(
        "--compose", type=Path, default=COMPOSE_FILE, help="the compose file to derive brokers from"
    )
    args = p.parse_args(argv)
    try:
        return up(args.dir, args.compose)
    except (LauncherError, ComposeError) as e:
        print(f"integration.kafka: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
