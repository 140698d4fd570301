"""Broker faults against a running agent: how often librdkafka#4605 aborts it (target: never).

Run:  flock /tmp/rackplan-kafka.lock .venv/bin/python bench/bench_broker_faults.py --kafka [--faults 12]

librdkafka 2.16 aborts a process from a coordinator-targeted Admin operation
(DescribeConsumerGroups) whose request meets the group coordinator going down or
coming back (``rd_kafka_enq_once_del_source_return: Assertion `eonce->refcnt > 0'``;
see rackplan/agent/kafka/isolated_admin.py).  This starts the integration suite's real
six-broker cluster and one agent process (``rackplan agent run --no-supervisor``:
nothing restarts it behind our back) that describes ``--groups`` discovery groups
every ``--poll`` seconds, their coordinators spread over every broker.  Then, ``--faults``
times, the broker leading the most ``__consumer_offsets`` partitions (the busiest
coordinator) is killed -9, left down ``--down`` seconds (past the 4 s broker session:
fenced, leaderships moved), restarted, and the agent is checked: an agent that died
is counted (with its signal and whether librdkafka's assertion is in its output)
and started again.  At the end the agent's own counts: DescribeGroups failures by
reason (``DescribeWorkerDied``: an abort its describe child took instead of it).
Without ``--kafka`` nothing is run (it needs ``make kafka`` and the cluster's lock).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ASSERTION = "rd_kafka_enq_once_del_source_return"


def metrics(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            return str(r.read().decode())
    except OSError:
        return ""


def metric_sum(text: str, name: str) -> dict[str, float]:
    """``name``'s samples by their label text (``""``: no labels)."""
    out: dict[str, float] = {}
    for m in re.finditer(rf"^{re.escape(name)}(\{{[^}}]*\}})? ([0-9.eE+-]+)$", text, re.M):
        out[m.group(1) or ""] = float(m.group(2))
    return out


def json_lines(path: Path) -> list[dict[str, object]]:
    """The JSON log events of a file (librdkafka's own lines and the like skipped)."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict):
                out.append(doc)
    return out


def busiest_coordinator(bootstrap: str) -> int:
    """The broker leading the most ``__consumer_offsets`` partitions."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=10)
    leaders: dict[int, int] = {}
    for pm in md.topics["__consumer_offsets"].partitions.values():
        if pm.leader >= 0:
            leaders[pm.leader] = leaders.get(pm.leader, 0) + 1
    return max(sorted(leaders), key=lambda b: leaders[b])


class AgentProcess:
    def __init__(self, config: Path, log: Path, port: int) -> None:
        self.config, self.log, self.port = config, log, port
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        out = self.log.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rackplan",
                "agent",
                "run",
                "--no-supervisor",
                "--config",
                str(self.config),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        out.close()
        self.starts += 1

    def cycles(self) -> float:
        return sum(metric_sum(metrics(self.port), "rackplan_cycle_duration_seconds_count").values())

    def wait_cycles(self, n: float, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while self.cycles() < n:
            if self.proc is None or self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the agent never ran {n:.0f} cycles: see {self.log}")
            time.sleep(0.5)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def run(args: argparse.Namespace) -> int:
    from integration.kafka.cluster import KafkaCluster, free_ports

    work = Path(tempfile.mkdtemp(prefix="rackplan-faults-"))
    cluster = KafkaCluster()
    agent: AgentProcess | None = None
    t0 = time.monotonic()
    try:
        print(cluster.start().line(), flush=True)
        (port,) = free_ports(1)
        doc = {
            "kafka": {"bootstrap_servers": cluster.bootstrap},
            "poll_interval_s": args.poll,
            "consumer_groups": [
                {"group_id": f"faults-g{i}", "assignor": "range", "members": []} for i in range(args.groups)
            ],
            "http": {"port": port},
            "log": {"format": "json", "level": "warning"},
        }
        config = work / "agent.json"
        config.write_text(json.dumps(doc))
        agent = AgentProcess(config, work / "agent.log", port)
        agent.start()
        agent.wait_cycles(3)
        aborts: list[str] = []
        for i in range(args.faults):
            victim = busiest_coordinator(cluster.bootstrap)
            before = agent.cycles()
            cluster.kill(victim)
            time.sleep(args.down)
            cluster.restart(victim, timeout=180)
            time.sleep(args.settle)
            assert agent.proc is not None
            code = agent.proc.poll()
            if code is not None:
                text = agent.log.read_text(errors="replace")
                how = signal.Signals(-code).name if code < 0 else f"exit {code}"
                aborts.append(f"{how}{' (librdkafka#4605)' if ASSERTION in text else ''}")
                print(f"fault {i + 1}: broker {victim} -> the agent died: {aborts[-1]}", flush=True)
                agent.log.rename(work / f"agent-{agent.starts}.log")
                agent.start()
                agent.wait_cycles(3)
                continue
            print(
                f"fault {i + 1}: broker {victim} killed -9 and restarted; agent alive, "
                f"{agent.cycles() - before:.0f} cycles meanwhile",
                flush=True,
            )
        text = metrics(port)
        failures = metric_sum(text, "rackplan_describe_groups_failures_total")
        worker_deaths = [
            str(event.get("how"))
            for log in sorted(work.glob("agent*.log"))
            for event in json_lines(log)
            if str(event.get("event", "")).startswith("describe worker ended")
        ]
        print(
            f"broker faults: {args.faults}, agent aborts: {len(aborts)} {aborts}, "
            f"describe-worker deaths absorbed: {len(worker_deaths)} {worker_deaths}, "
            f"DescribeGroups failures by reason: {failures}, {time.monotonic() - t0:.0f} s",
            flush=True,
        )
        return 1 if aborts else 0
    finally:
        if agent is not None:
            agent.stop()
        cluster.close()
        if not args.keep:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"agent logs kept in {work}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kafka", action="store_true", help="run it (the real cluster: make kafka)")
    ap.add_argument("--faults", type=int, default=12)
    ap.add_argument("--groups", type=int, default=24)
    ap.add_argument("--poll", type=float, default=0.5, help="the agent's poll_interval_s")
    ap.add_argument("--down", type=float, default=6.0, help="seconds a killed broker stays down")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds after the restart before checking")
    ap.add_argument("--keep", action="store_true", help="keep the agent's logs")
    args = ap.parse_args(argv)
    if not args.kafka:
        print("bench_broker_faults: needs the real cluster; run with --kafka (see its docstring)")
        return 0
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
