"""The HTTP server's answers, byte for byte where they matter, and /metrics' negotiation over HTTP.

The table of requests and answers was recorded from the hand-written parser (commit bc661b7) and holds
with h11; the three differences are their own tests below.
"""

from __future__ import annotations

import gzip
import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

from rackplan.agent.runtime.http import MAX_HEAD_BYTES, AgentHttpServer
from rackplan.agent.testing import FakeAdmin
from tests.agent.cycle.test_run import cycle, group, make_agent

TEXT = "text/plain; version=0.0.4; charset=utf-8"


@pytest.fixture
def port() -> Iterator[int]:
    agent, _, _ = make_agent(FakeAdmin({"t": [[1], [2]]}), [group("g")])
    cycle(agent)
    server = AgentHttpServer(agent.status, agent.metrics, "127.0.0.1", 0)
    server.start()
    try:
        yield server.port
    finally:
        server.close()
        agent.close()


class Answer:
    """One answer read off a socket: status, headers (lower-case names), body, and whether it closed after."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes, closed: bool) -> None:
        self.status, self.headers, self.body, self.closed = status, headers, body, closed


def _read_answer(sock: socket.socket, buf: bytes, head_only: bool) -> tuple[Answer, bytes]:
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a whole answer: {buf!r}"
        buf += chunk
    head, _, buf = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = 0 if head_only else int(headers["content-length"])
    while len(buf) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed before the whole body"
        buf += chunk
    return Answer(int(lines[0].split(" ")[1]), headers, buf[:length], False), buf[length:]


def exchange(port: int, data: bytes, answers: int = 1, head_only: bool = False) -> list[Answer]:
    """Send ``data``, read ``answers`` answers, then whether the server closes (within 1 s) or keeps it open."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        out, buf = [], b""
        for _ in range(answers):
            answer, buf = _read_answer(sock, buf, head_only)
            out.append(answer)
        sock.settimeout(1.0)
        try:
            out[-1].closed = sock.recv(1) == b""
        except TimeoutError:
            out[-1].closed = False
        except OSError:
            out[-1].closed = True
    return out


def request(method: str, path: str, *headers: str, version: str = "1.1") -> bytes:
    return "\r\n".join([f"{method} {path} HTTP/{version}", "Host: rackplan", *headers, "", ""]).encode()


#: request -> status, content type, body (or a check of it), Connection header, closed after
CASES: list[tuple[bytes, int, str, Any, str, bool]] = [
    (request("GET", "/healthz"), 200, "text/plain", b"ok\n", "keep-alive", False),
    (request("GET", "/readyz"), 200, "text/plain", b"ready\n", "keep-alive", False),
    (request("GET", "/v1/plans?x=1"), 200, "application/json", lambda d: "consumer/g" in d, "keep-alive", False),
    (request("GET", "/v1/status"), 200, "application/json", lambda d: d["role"] == "leader", "keep-alive", False),
    (request("GET", "/v1/groups"), 200, "application/json", lambda d: d[0]["key"] == "consumer/g", "keep-alive",
     False),
    (request("GET", "/v1/groups/consumer/g"), 200, "application/json", lambda d: d["generation"] == 1,
     "keep-alive", False),
    (request("GET", "/v1/groups/consumer/nope"), 404, "application/json",
     {"error": "no such group consumer/nope"}, "keep-alive", False),
    (request("GET", "/nope"), 404, "application/json", {"error": "no such path /nope"}, "keep-alive", False),
    (request("GET", "//v1/plans"), 404, "application/json", {"error": "no such path //v1/plans"}, "keep-alive",
     False),
    (request("GET", "//[/healthz"), 404, "application/json", {"error": "no such path //[/healthz"}, "keep-alive",
     False),
    (request("GET", "http://rackplan/healthz"), 200, "text/plain", b"ok\n", "keep-alive", False),
    (request("GET", "/metrics"), 200, TEXT, lambda t: "# TYPE rackplan_ready gauge\n" in t, "keep-alive", False),
    (request("DELETE", "/healthz"), 405, "text/plain", b"only GET\n", "keep-alive", False),
    (request("POST", "/v1/plans", "Content-Length: 2") + b"{}", 405, "text/plain", b"only GET\n", "close", True),
    (request("GET", "/healthz", "Connection: close"), 200, "text/plain", b"ok\n", "close", True),
    (request("GET", "/healthz", version="1.0"), 200, "text/plain", b"ok\n", "close", True),
    (b"GARBAGE\r\n\r\n", 400, "text/plain", lambda t: t.startswith("malformed request"), "close", True),
    (request("GET", "/", version="2.0"), 505, "text/plain", b"unsupported version 'HTTP/2.0'\n", "close", True),
]  # fmt: skip


@pytest.mark.parametrize(("data", "status", "ctype", "body", "connection", "closed"), CASES)
def test_each_request_gets_the_answer_it_had(
    port: int, data: bytes, status: int, ctype: str, body: Any, connection: str, closed: bool
) -> None:
    [answer] = exchange(port, data)
    assert (answer.status, answer.headers["content-type"]) == (status, ctype)
    assert answer.headers["content-length"] == str(len(answer.body))
    assert (answer.headers["connection"], answer.closed) == (connection, closed)
    if callable(body):
        assert body(json.loads(answer.body) if ctype == "application/json" else answer.body.decode())
    elif isinstance(body, dict):
        assert json.loads(answer.body) == body
    else:
        assert answer.body == body


def test_head_has_the_length_and_no_body_and_pipelined_requests_are_answered_in_order(port: int) -> None:
    [head] = exchange(port, request("HEAD", "/readyz"), head_only=True)
    assert head.status == 200 and head.headers["content-length"] == "6" and head.body == b""
    answers = exchange(
        port, request("GET", "/healthz") + request("GET", "/nope") + request("GET", "/readyz"), 3
    )
    assert [(a.status, a.body) for a in answers] == [
        (200, b"ok\n"),
        (404, b'{"error":"no such path /nope"}'),
        (200, b"ready\n"),
    ]
    assert not answers[-1].closed


@pytest.mark.parametrize("whole", [True, False])
def test_a_head_over_the_limit_is_refused_whether_it_arrives_whole_or_in_parts(
    port: int, whole: bool
) -> None:
    big = request("GET", "/healthz", "X-Pad: " + "a" * MAX_HEAD_BYTES)
    if whole:
        [answer] = exchange(port, big)
    else:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            for i in range(0, len(big), 1000):
                try:
                    sock.sendall(big[i : i + 1000])
                except OSError:
                    break  # refused before the rest was sent
            answer, _ = _read_answer(sock, b"", False)
    assert (answer.status, answer.body) == (431, b"request head too large\n")


def test_http_1_0_keep_alive_and_a_missing_host_are_what_http_1_1_servers_do(port: int) -> None:
    """Two differences from the hand-written parser (h11's rules, RFC 9112): an HTTP/1.0 client asking for
    keep-alive gets one answer and the close (it had the connection kept); an HTTP/1.1 request without
    ``Host`` is a 400 (it was answered).  Every probe and scraper sends HTTP/1.1 with ``Host``."""
    [old] = exchange(port, b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    assert (old.status, old.body, old.headers["connection"], old.closed) == (200, b"ok\n", "close", True)
    [hostless] = exchange(port, b"GET /healthz HTTP/1.1\r\n\r\n")
    assert (hostless.status, hostless.closed) == (400, True)


# ---- /metrics: content negotiation ------------------------------------------------------------------


def test_metrics_negotiates_openmetrics_and_gzip(port: int) -> None:
    """Before: text 0.0.4, uncompressed, whatever was asked."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(
            "GET",
            "/metrics",
            headers={"Accept": "application/openmetrics-text;version=1.0.0", "Accept-Encoding": "gzip"},
        )
        resp = conn.getresponse()
        packed = resp.read()
        assert resp.status == 200 and resp.getheader("Content-Encoding") == "gzip"
        assert resp.getheader("Content-Type", "").startswith("application/openmetrics-text; version=1.0.0")
        assert resp.getheader("Vary") == "Accept, Accept-Encoding"
        assert resp.getheader("Content-Length") == str(len(packed))
        body = gzip.decompress(packed).decode()
        assert body.endswith("\n# EOF\n")
        families = {f.name: f.type for f in parse_openmetrics(body)}  # type: ignore[no-untyped-call]
        assert (
            families["rackplan_polls"] == "counter"
            and families["rackplan_cycle_duration_seconds"] == "histogram"
        )
        conn.request("GET", "/metrics")  # the same connection, kept alive: the plain text format
        resp = conn.getresponse()
        plain = resp.read().decode()
        assert resp.getheader("Content-Type") == TEXT and resp.getheader("Content-Encoding") is None
        assert "# TYPE rackplan_polls_total counter\n" in plain and "# EOF" not in plain
    finally:
        conn.close()


@pytest.mark.parametrize("method", ["DELETE", "POST", "PUT", "OPTIONS"])
def test_a_405_says_which_methods_are_allowed(port: int, method: str) -> None:
    """RFC 9110 15.5.6: a 405 answer MUST carry ``Allow``; it had none (found by a hunt)."""
    [answer] = exchange(port, request(method, "/healthz"))
    assert answer.status == 405 and answer.headers.get("allow") == "GET, HEAD"
