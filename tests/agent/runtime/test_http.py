"""The agent's HTTP server under load (issue 11 H): backlog, slow clients, disconnects, the per-group view."""

from __future__ import annotations

import http.client
import io
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from rackplan.agent.core.logging import configure
from rackplan.agent.runtime.http import BACKLOG, HEADER_TIMEOUT_S, WORKERS, AgentHttpServer
from rackplan.agent.runtime.loop import Agent
from rackplan.agent.testing import FakeAdmin
from tests.agent.cycle.test_run import cycle, group, make_agent


@pytest.fixture
def agent_and_log() -> Iterator[tuple[Agent, io.StringIO]]:
    agent, _, buf = make_agent(FakeAdmin({"t": [[1], [2]]}), [group("g")])
    cycle(agent)
    yield agent, buf
    agent.close()


def get(port: int, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def serve(agent: Agent, header_timeout_s: float = HEADER_TIMEOUT_S) -> AgentHttpServer:
    server = AgentHttpServer(agent.status, agent.metrics, "127.0.0.1", 0, header_timeout_s=header_timeout_s)
    server.start()
    return server


def test_the_group_view_is_where_alerts_point(agent_and_log: tuple[Agent, io.StringIO]) -> None:
    agent, _ = agent_and_log
    server = serve(agent)
    try:
        code, body = get(server.port, "/v1/groups/consumer/g")
        doc = json.loads(body)
        assert code == 200 and doc["key"] == "consumer/g" and doc["generation"] == 1
        assert doc["alert_state"] == "ok"
        assert get(server.port, "/v1/groups/consumer/nope")[0] == 404
        assert get(server.port, "/v1/groups/consumer")[0] == 404
        assert json.loads(get(server.port, "/v1/groups")[1])[0]["key"] == "consumer/g"
        assert get(server.port, "/healthz") == (200, b"ok\n")
    finally:
        server.close()


def test_64_concurrent_clients_many_requests_none_times_out(agent_and_log: tuple[Agent, io.StringIO]) -> None:
    agent, _ = agent_and_log
    server = serve(agent)
    clients, requests = 64, 60
    failures: list[str] = []
    ok = [0]
    lock = threading.Lock()
    start = threading.Barrier(clients)

    def client(i: int) -> None:
        start.wait()
        keep = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        for n in range(requests):
            try:
                if n % 2:  # half on a kept-alive connection, half a new connection each
                    keep.request("GET", "/metrics")
                    resp = keep.getresponse()
                    status, body = resp.status, resp.read()
                else:
                    status, body = get(server.port, "/metrics")
                assert status == 200 and b"rackplan_ready" in body
                with lock:
                    ok[0] += 1
            except Exception as e:
                with lock:
                    failures.append(repr(e))
                keep.close()
                keep = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        keep.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    t0 = time.monotonic()
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        server.close()
    took = time.monotonic() - t0
    print(f"{clients} clients x {requests} requests: {ok[0]} ok, {len(failures)} failed in {took:.1f}s")
    assert failures == [] and ok[0] == clients * requests
    assert server.backlog == BACKLOG >= 128


def test_slow_clients_hold_no_thread_and_do_not_delay_a_normal_request(
    agent_and_log: tuple[Agent, io.StringIO],
) -> None:
    agent, _ = agent_and_log
    server = serve(agent, header_timeout_s=2.0)
    threads_before = threading.active_count()
    slow: list[socket.socket] = []
    try:
        for i in range(250):  # half send nothing, half an unfinished request
            s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            if i % 2:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            slow.append(s)
        time.sleep(0.3)
        t0 = time.monotonic()
        assert get(server.port, "/readyz", timeout=2)[0] == 200
        took = time.monotonic() - t0
        held = threading.active_count() - threads_before
        print(f"250 slow clients: a normal request took {took * 1000:.1f} ms; threads added {held}")
        assert took < 1.0
        assert held <= WORKERS  # the render pool, never a thread per connection
        # The slow ones are dropped after header_timeout_s: the server closes them.
        time.sleep(2.5)
        closed = 0
        for s in slow:
            s.settimeout(2)
            try:
                closed += s.recv(1) == b""
            except OSError:
                closed += 1
        assert closed == len(slow)
    finally:
        for s in slow:
            s.close()
        server.close()


def test_client_disconnects_are_one_json_event_never_a_traceback(
    agent_and_log: tuple[Agent, io.StringIO], capfd: pytest.CaptureFixture[str]
) -> None:
    agent, _ = agent_and_log
    buf = io.StringIO()
    configure("json", "debug", stream=buf)
    server = serve(agent)
    try:
        for _ in range(20):  # an unfinished request, then the client goes away
            s = socket.create_connection(("127.0.0.1", server.port))
            s.sendall(b"GET /metrics HTTP/1.1\r\n")
            s.close()
        for _ in range(20):  # a whole request, then a reset (SO_LINGER 0) before the answer is read
            s = socket.create_connection(("127.0.0.1", server.port))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 50)
            s.close()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and buf.getvalue().count("http client disconnected") < 20:
            time.sleep(0.05)
        assert get(server.port, "/healthz")[0] == 200  # still serving
    finally:
        server.close()
    out, err = capfd.readouterr()
    lines = buf.getvalue().splitlines()
    events = [json.loads(line) for line in lines]  # every line is one JSON event
    gone = [e for e in events if e["event"] == "http client disconnected"]
    print(f"{len(gone)} disconnect events in {len(lines)} log lines")
    assert 20 <= len(gone) <= 40  # at most one per connection
    assert all(e["client"].startswith("127.0.0.1:") for e in gone)
    assert "Traceback" not in buf.getvalue() + out + err
