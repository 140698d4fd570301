"""The HTTP server at its connection limit (issue 24 #11): probes answer while 1,030 kept-alive clients hold on.

Counts, not wall time: the kept-alive clients are set up one after another
(so their idle order is known), the header timeout is long enough that none
times out during the test, and every probe must answer 200.
"""

from __future__ import annotations

import http.client
import io
import json
import resource
import socket
import threading
from collections.abc import Iterator

import pytest

from rackplan.agent.core.logging import configure
from rackplan.agent.runtime.http import MAX_CONNECTIONS, AgentHttpServer
from rackplan.agent.runtime.loop import Agent
from rackplan.agent.testing import FakeAdmin
from tests.agent.cycle.test_run import cycle, group, make_agent

KEPT_ALIVE = 1030
PROBES = 50


@pytest.fixture
def agent() -> Iterator[Agent]:
    agent, _, _ = make_agent(FakeAdmin({"t": [[1], [2]]}), [group("g")])
    cycle(agent)
    yield agent
    agent.close()


def _enough_descriptors(need: int) -> None:
    """Client and server ends live in this process: ~2 descriptors a connection."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.skip(f"needs {need} file descriptors; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def _status(sock: socket.socket) -> int | None:
    """The status of one answer on a kept-alive socket (its body read); None when the server closed it."""
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        length = next(int(h.split(":")[1]) for h in lines if h.lower().startswith("content-length:"))
        while len(body) < length:
            chunk = sock.recv(4096)
            if not chunk:
                return None
            body += chunk
        return int(lines[0].split(" ")[1])
    except OSError:  # reset: the server aborted the connection
        return None


def _ask(sock: socket.socket, path: str) -> int | None:
    try:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: rackplan\r\n\r\n".encode())
    except OSError:
        return None
    return _status(sock)


def _closed(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        sock.setblocking(True)


def _probe(port: int, path: str) -> int | None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    except OSError:
        return None
    finally:
        conn.close()


def test_probes_answer_while_1030_kept_alive_clients_hold_their_connections(agent: Agent) -> None:
    """Before: connections over 1,024 were aborted, so every probe failed while the idle clients stayed."""
    _enough_descriptors(2 * (KEPT_ALIVE + PROBES) + 500)
    buf = io.StringIO()
    configure("json", "info", stream=buf)
    server = AgentHttpServer(agent.status, agent.metrics, "127.0.0.1", 0, header_timeout_s=600.0)
    server.start()
    clients: list[socket.socket] = []
    try:
        assert server.max_connections == MAX_CONNECTIONS == 1024 < KEPT_ALIVE
        answered = 0
        for _ in range(KEPT_ALIVE):  # one after another: client i has been idle longer than client i + 1
            s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            clients.append(s)
            answered += _ask(s, "/healthz") == 200
        probes = [_probe(server.port, "/healthz" if i % 2 else "/readyz") for i in range(PROBES)]
        closed = [_closed(s) for s in clients]
        evicted = sum(closed)
        # the still-open clients keep being served on their kept-alive connections
        later = [_ask(s, "/readyz") for s, c in zip(clients, closed, strict=True) if not c]
    finally:
        for s in clients:
            s.close()
        server.close()
    print(
        f"{KEPT_ALIVE} kept-alive clients: {answered} answered; {PROBES} probes: "
        f"{probes.count(200)} answered 200; {evicted} idle connections closed"
    )
    assert answered == KEPT_ALIVE
    assert probes == [200] * PROBES
    # the longest idle went first: the closed clients are the oldest ones, and no more than needed
    assert closed == [True] * evicted + [False] * (KEPT_ALIVE - evicted)
    assert KEPT_ALIVE - MAX_CONNECTIONS <= evicted <= KEPT_ALIVE + PROBES - MAX_CONNECTIONS
    assert later == [200] * (KEPT_ALIVE - evicted)
    events = [json.loads(line) for line in buf.getvalue().splitlines()]
    limit = [e for e in events if e["event"].startswith("http connection limit reached")]
    assert limit and limit[0]["limit"] == MAX_CONNECTIONS and "Traceback" not in buf.getvalue()
    assert server.evicted == evicted


def test_the_connection_limit_leaves_room_for_the_process_descriptors() -> None:
    """At 1,024 descriptors (a common default), 1,024 connections would fail accept() with EMFILE first."""
    from rackplan.agent.runtime.http import FD_RESERVE, connection_limit

    assert connection_limit(1024, soft_fd_limit=1_048_576) == 1024
    assert connection_limit(1024, soft_fd_limit=1024) == 1024 - FD_RESERVE
    assert connection_limit(1024, soft_fd_limit=resource.RLIM_INFINITY) == 1024
    assert connection_limit(1024, soft_fd_limit=FD_RESERVE) == 1  # never none at all


def test_a_connection_being_answered_is_never_evicted(agent: Agent) -> None:
    """At the limit the idle connection goes, not the one whose answer is being rendered; all busy: refused."""
    server = AgentHttpServer(agent.status, agent.metrics, "127.0.0.1", 0, max_connections=2)
    entered, release = threading.Event(), threading.Event()
    fast = server.route

    def route(path: str) -> tuple[int, bytes, str]:
        if path == "/slow":  # a /metrics render that takes a while
            entered.set()
            release.wait(30)
            return fast("/metrics")
        return fast(path)

    server.route = route
    server.start()
    busy = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    idle = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    extra: list[socket.socket] = []
    try:
        assert _ask(idle, "/healthz") == 200
        busy.sendall(b"GET /slow HTTP/1.1\r\nHost: rackplan\r\n\r\n")
        assert entered.wait(30)
        extra.append(socket.create_connection(("127.0.0.1", server.port), timeout=30))
        assert _ask(extra[-1], "/readyz") == 200  # room made by closing the idle one
        assert _status(idle) is None or _closed(idle)
        release.set()
        assert _status(busy) == 200  # the busy one was left alone
        assert server.evicted == 1
    finally:
        release.set()
        for s in (busy, idle, *extra):
            s.close()
        server.close()
