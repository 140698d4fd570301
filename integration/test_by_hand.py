"""integration/README.md's "By hand" section, run as written on the suite's real cluster.

The topic ``python -m integration.kafka up`` creates, the ``agent run`` it prints (plus its own topic
names and HTTP port: the cluster is shared with other tests), and the README's reassignment with
Kafka's own tool: the agent publishes generation 1, then generation 2 with orders-0 moved to the
member in az-c.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from integration.kafka.cluster import KafkaCluster
from integration.kafka.example import (
    EXAMPLE_MOVE,
    EXAMPLE_TOPIC,
    agent_run_command,
    create_example_topic,
    example_replicas,
    try_lines,
)

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "integration" / "README.md").read_text(encoding="utf-8")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _plans(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            doc: dict[str, Any] = json.loads(r.read())
            return doc
    except OSError:
        return {}


def test_the_readme_shows_what_up_prints() -> None:
    printed = try_lines("<bootstrap>", example_replicas([1, 2, 3, 4, 5, 6]))
    assert f"  {agent_run_command('<bootstrap>')}\n" in README
    assert f"{printed[0]}\n" in README
    move = re.search(r"^echo '(\{.*\})' > /tmp/move.json$", README, re.M)
    assert move is not None and json.loads(move[1]) == EXAMPLE_MOVE


def test_by_hand_on_real_kafka(launched: KafkaCluster, tmp_path: Path) -> None:
    bootstrap = launched.bootstrap
    replicas = create_example_topic(bootstrap, [n.node_id for n in launched.brokers])
    assert replicas == example_replicas([n.node_id for n in launched.brokers])
    prefix = f"byhand-{uuid.uuid4().hex[:8]}"
    own = {
        "RACKPLAN_PLAN_TOPIC": f"{prefix}.plans",
        "RACKPLAN_ALERTS_TOPIC": f"{prefix}.alerts",
        "RACKPLAN_REGISTRATIONS_TOPIC": f"{prefix}.registrations",
        "RACKPLAN_HA__LEASE_TOPIC": f"{prefix}.lease",
        "RACKPLAN_HTTP__PORT": str(_free_port()),
        "RACKPLAN_POLL_INTERVAL_S": "1",
        "RACKPLAN_LOG__FORMAT": "json",
    }
    words = shlex.split(agent_run_command(bootstrap))
    env_words = [w for w in words if re.match(r"RACKPLAN_\w+=", w)]
    command = [w for w in words if w not in env_words]
    assert command == ["rackplan", "agent", "run"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RACKPLAN_")}
    env.update(dict(w.split("=", 1) for w in env_words))
    env.update(own)
    agent = subprocess.Popen(
        [sys.executable, "-m", "rackplan", *command[1:]],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=ROOT,
    )
    url = f"http://127.0.0.1:{own['RACKPLAN_HTTP__PORT']}/v1/plans"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and "consumer/payments" not in _plans(url):
            assert agent.poll() is None, agent.communicate()[0][-3000:]
            time.sleep(0.5)
        first = _plans(url)["consumer/payments"]
        assert first["generation"] == 1

        move = tmp_path / "move.json"
        move.write_text(json.dumps(EXAMPLE_MOVE), encoding="utf-8")
        java = re.search(r"^(java -cp .*?--execute)$", README.replace("\\\n  ", ""), re.M)
        assert java is not None
        cmd = shlex.split(java[1].replace("/tmp/move.json", str(move)).replace("<bootstrap>", bootstrap))
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "Successfully started" in r.stdout, r.stdout + r.stderr

        t0 = time.monotonic()
        second: dict[str, Any] = first
        while time.monotonic() < t0 + 90 and second["generation"] < 2:
            assert agent.poll() is None, agent.communicate()[0][-3000:]
            time.sleep(0.5)
            second = _plans(url).get("consumer/payments", first)
        print(f"by hand: generation 2 published {time.monotonic() - t0:.1f} s after the reassignment")
        assert second["generation"] == 2 and "orders-0" in second["reason"], second
        assignment = second["consumer_group"]["assignment"]
        assert [EXAMPLE_TOPIC, 0] in assignment["m-c"], assignment
        agent.send_signal(signal.SIGTERM)
        agent.communicate(timeout=60)
        assert agent.returncode == 0
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.communicate()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = [EXAMPLE_TOPIC, *(own[k] for k in own if k.endswith("_TOPIC"))]
        for f in admin.delete_topics(topics, operation_timeout=30).values():
            with contextlib.suppress(Exception):  # a topic the agent did not get to create
                f.result(timeout=60)
