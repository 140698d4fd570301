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

from agent.embedded import EmbeddedCluster
from agent.kafka_io import read_back
from agent.logging import get_logger
from agent.plans import PlanRecord

RACKPLAN = [sys.executable, "-c", "import sys; from assignor.cli import main; sys.exit(main())"]


def test_agent_run_publishes_then_exits_0_on_sigterm(
    make_cluster: Callable[..., EmbeddedCluster], tmp_path: Path
) -> None:
    c = make_cluster()
    c.create_topic("orders", 6, 2)
    c.create_topic("_rackplan.plans", 1, 3)  # the mock has no CreateTopics
    c.create_topic("_rackplan.alerts", 1, 3)
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
    assert not any(line.startswith("{") for line in out.splitlines())  # no log lines in the story
    assert max(len(line) for line in out.splitlines()) <= 110
    assert p.stderr == ""
    # generation 2 of each group republished after the change
    assert sum(1 for line in out.splitlines() if line.strip().split()[1:2] == ["2"]) >= 2
    # Routine things are at info in the log, with the accurate message; nothing says "create it by hand".
    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert not [e for e in events if "by hand" in e["event"]]
    created = [e for e in events if e["event"].startswith("topic missing and the brokers do not create it")]
    assert {e["topic"] for e in created} == {"_rackplan.plans", "_rackplan.alerts", "_rackplan.lease"}
    assert all(e["level"] == "info" for e in created)
    received = [e for e in events if e["event"] == "registrations topic replayed"]
    assert received and received[0]["entries"] == 2
