"""``rackplan agent run`` as a process (SIGTERM: exit 0) and ``rackplan demo`` end to end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from rackplan.agent.core.logging import get_logger
from rackplan.agent.kafka.embedded import EmbeddedCluster
from rackplan.agent.kafka.read_back import read_back
from rackplan.agent.protocol.plans import PlanRecord

RACKPLAN = [sys.executable, "-c", "import sys; from rackplan.cli import main; sys.exit(main())"]


def test_agent_run_publishes_then_exits_0_on_sigterm(
    make_cluster: Callable[..., EmbeddedCluster], tmp_path: Path
) -> None:
    c = make_cluster()
    c.create_topic("orders", 6, 2)
    c.create_topic("_rackplan.plans", 1, 3)  # the mock has no CreateTopics
    c.create_topic("_rackplan.alerts", 1, 3)
    c.create_topic("_rackplan.lease", 1, 3)  # the lease is on by default
    config = tmp_path / "rackplan.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "kafka": {"bootstrap_servers": "overridden-by-env:1", "config": {"sasl.password": "hunter2"}},
                "poll_interval_s": 0.3,
                "consumer_groups": [
                    {
                        "group_id": "g",
                        "assignor": "range",
                        "members": [{"member_id": "m", "rack": "az-a", "topics": ["orders"]}],
                    }
                ],
                "log": {"format": "json"},
            }
        ),
        encoding="utf-8",
    )
    env = {**os.environ, "RACKPLAN_KAFKA__BOOTSTRAP_SERVERS": c.bootstrap_servers}
    proc = subprocess.Popen(
        [*RACKPLAN, "agent", "run", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        records: list[tuple[str, PlanRecord | None]] = []
        while time.monotonic() < deadline and not records:
            time.sleep(0.3)
            records = read_back(
                {"bootstrap.servers": c.bootstrap_servers}, "_rackplan.plans", 5, get_logger("t")
            )
        assert [k for k, _ in records] == ["consumer/g"]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    names = [e["event"] for e in events]
    assert "plan published" in names and names[-1] == "agent stopped"
    assert "hunter2" not in out + err


def test_agent_run_rejects_bad_settings(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("poll_interval_s: -1\n", encoding="utf-8")
    p = subprocess.run(
        [*RACKPLAN, "agent", "run", "--config", str(config)], capture_output=True, text=True, timeout=30
    )
    assert p.returncode == 2 and "poll_interval_s" in p.stderr


def test_demo_ends_by_itself_with_a_readable_summary(tmp_path: Path) -> None:
    """Not a TTY here (pipes): the summary is plain text, the agent's log is in its file, not in the way."""
    log = tmp_path / "demo.log"
    t0 = time.monotonic()
    p = subprocess.run(
        [*RACKPLAN, "demo", "--log-file", str(log)], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stderr
    assert time.monotonic() - t0 < 60
    out = p.stdout
    for expected in ("1. Initial plans", "UNFIXABLE consumer/audit", "no assignment gets under",
                     "2. Decommissioning broker 3", "change confirmed", "replica racks changed",
                     "3. Republished plans", "4. Locality alerts", "RESOLVED", "5. Webhook",
                     "consumer/audit by its 2 members on _rackplan.registrations"):  # fmt: skip
        assert expected in out, out
    assert "\x1b[" not in out and "\r" not in out  # no colours, no cursor tricks
    assert [line for line in out.splitlines() if line.startswith("{")] == []  # no log lines in the story
    assert max(len(line) for line in out.splitlines()) <= 110
    assert p.stderr == ""
    # generation 2 of each group republished after the change
    assert sum(1 for line in out.splitlines() if line.strip().split()[1:2] == ["2"]) >= 2
    # Routine things are at info in the log, with the accurate message; nothing says "create it by hand".
    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert not [e for e in events if "by hand" in e["event"]]
    created = [e for e in events if e["event"].startswith("topic missing and the brokers do not create it")]
    assert {e["topic"] for e in created} == {
        "_rackplan.plans",
        "_rackplan.alerts",
        "_rackplan.lease",
        "_rackplan.traffic",
    }
    assert all(e["level"] == "info" for e in created)
    received = [e for e in events if e["event"] == "registrations topic replayed"]
    assert received and received[0]["entries"] == 2


def test_demo_keep_running_prints_a_cluster_to_try_agent_run_on(tmp_path: Path) -> None:
    """Issue 12: without Docker, ``demo --keep-running`` is the cluster to try ``agent run`` on.

    It prints the bootstrap, its agent's URL, and a settings file; the printed ``agent run`` publishes a
    plan there, both HTTP URLs answer, and the kcat line names the demo's plan topic, which has plans.
    """
    import re
    import urllib.request

    demo = subprocess.Popen(
        [*RACKPLAN, "demo", "--keep-running", "--log-file", str(tmp_path / "demo.log")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    agent: subprocess.Popen[str] | None = None
    try:
        assert demo.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not any(
            line.startswith("Keeping the cluster") for line in lines
        ):
            line = demo.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
        out = "\n".join(lines)
        bootstrap = re.search(r"^  bootstrap    (\S+)$", out, re.M)
        base = re.search(r"^  agent HTTP   (http://127\.0\.0\.1:\d+)  ", out, re.M)
        config = re.search(r"^  your agent   rackplan agent run --config (\S+)$", out, re.M)
        assert bootstrap and base and config, out
        assert f"kcat -b {bootstrap[1].split(',')[0]} -C -t _rackplan.plans" in out
        assert f"curl -s {base[1]}/v1/plans" in out
        with urllib.request.urlopen(f"{base[1]}/v1/plans", timeout=10) as r:
            assert "consumer/payments" in json.loads(r.read())
        records = read_back({"bootstrap.servers": bootstrap[1]}, "_rackplan.plans", 10, get_logger("t"))
        assert "consumer/payments" in {k for k, _ in records}

        doc = yaml.safe_load(Path(config[1]).read_text(encoding="utf-8"))
        assert doc["kafka"]["bootstrap_servers"] == bootstrap[1]
        agent = subprocess.Popen(
            [*RACKPLAN, "agent", "run", "--config", config[1]],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={k: v for k, v in os.environ.items() if not k.startswith("RACKPLAN_")},
        )
        url = f"http://127.0.0.1:{doc['http']['port']}/v1/plans"
        plans: dict[str, object] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "consumer/payments" not in plans:
            assert agent.poll() is None, agent.communicate()
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    plans = json.loads(r.read())
            except OSError:
                continue
        if "consumer/payments" not in plans:  # its own log says why (a standby names what it waits for)
            agent.kill()
            _, err = agent.communicate()
            raise AssertionError(f"no plan from the printed agent run in 30 s: {plans}\n{err[-6000:]}")
        records = read_back({"bootstrap.servers": bootstrap[1]}, doc["plan_topic"], 10, get_logger("t"))
        assert [k for k, _ in records] == ["consumer/payments"]
        agent.send_signal(signal.SIGTERM)
        agent.communicate(timeout=30)
        assert agent.returncode == 0
        demo.send_signal(signal.SIGINT)
        demo.communicate(timeout=30)
        assert demo.returncode == 0
    finally:
        for p in (agent, demo):
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate()
