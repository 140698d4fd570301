"""The agent's read-only HTTP endpoints while it runs on the embedded cluster."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from rackplan.agent.demo.run import topic_creator
from rackplan.agent.kafka.embedded import EmbeddedCluster
from rackplan.agent.runtime.loop import Agent
from tests import promtool

from .conftest import RunningAgent, agent_settings, range_group


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_endpoints(make_cluster: Callable[..., EmbeddedCluster]) -> None:
    c = make_cluster()
    c.create_topic("orders", 6, 2)
    settings = agent_settings(c.bootstrap_servers, [range_group("payments", ["orders"])], http={"port": 0})
    agent = Agent(settings, create_missing_topics=topic_creator(c), serve_http=True)
    running = RunningAgent(agent)
    try:
        deadline = time.monotonic() + 10
        while agent.http is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert agent.http is not None
        port = agent.http.port
        assert get(port, "/healthz") == (200, "ok\n")
        running.wait_for(lambda r: r.ok)
        assert get(port, "/readyz")[0] == 200
        status, body = get(port, "/metrics")
        assert status == 200
        assert 'rackplan_plans_published_total{kind="consumer"} 1' in body
        assert 'rackplan_cross_rack_partitions{group="payments",kind="consumer"}' in body
        assert 'rackplan_polls_total{result="ok"}' in body
        assert (
            'rackplan_assigned_partitions{group="payments",kind="consumer",locality="local",rack="az-a"}'
            in body
        )
        assert 'rackplan_brokers{rack="az-b"} 2' in body
        assert 'rackplan_registrations{kind="consumer",source="file"} 1' in body
        assert "rackplan_ready 1" in body and "rackplan_snapshot_age_seconds " in body
        assert "payments-a" not in body  # no member ids in labels
        checked = promtool.run("check", "metrics", stdin=body)  # the running agent's exposition, linted
        assert checked.returncode == 0, checked.stdout + checked.stderr
        status, body = get(port, "/v1/plans")
        plans: dict[str, Any] = json.loads(body)
        assert status == 200 and plans["consumer/payments"]["generation"] == 1
        groups = json.loads(get(port, "/v1/groups")[1])
        assert groups[0]["key"] == "consumer/payments" and groups[0]["alert_firing"] is False
        assert get(port, "/nope")[0] == 404
    finally:
        running.stop()
    assert agent.http is None


def test_not_ready_until_replayed_and_a_first_complete_snapshot(
    make_cluster: Callable[..., EmbeddedCluster],
) -> None:
    c = make_cluster()
    c.create_topic("orders", 6, 2)
    metadata = {"request_timeout_s": 0.5, "max_attempts": 1}
    settings = agent_settings(
        c.bootstrap_servers, [range_group("payments", ["orders"])], http={"port": 0}, metadata=metadata
    )
    agent = Agent(settings, create_missing_topics=topic_creator(c))
    from rackplan.agent.runtime.http import AgentHttpServer

    server = AgentHttpServer(agent.status, agent.metrics, "127.0.0.1", 0)
    server.start()
    try:
        assert get(server.port, "/readyz") == (503, "not ready\n")  # nothing replayed yet
        assert get(server.port, "/healthz")[0] == 200
        agent.start()
        assert get(server.port, "/readyz")[0] == 503  # replayed, but no snapshot yet
        c.set_down(-1)
        assert not agent.run_once().ok
        assert get(server.port, "/readyz")[0] == 503  # a failed poll is not a snapshot
        assert "rackplan_ready 0" in get(server.port, "/metrics")[1]
        c.set_up(-1)
        deadline = time.monotonic() + 20
        while not agent.run_once().ok and time.monotonic() < deadline:
            time.sleep(0.1)
        assert get(server.port, "/readyz") == (200, "ready\n")
        assert "rackplan_ready 1" in get(server.port, "/metrics")[1]
    finally:
        server.close()
        agent.close()
