"""A webhook request has one deadline and reads a bounded answer.

The socket timeout bounded each read, not the request: a receiver dripping its answer a byte at a time held
the one worker (and every later alert) for ever, and ``close()`` could not keep its bound.  The whole body
was read: a 400 MB answer cost 400 MB.
"""

from __future__ import annotations

import socket
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rackplan.agent.alerts.transport import MAX_RESPONSE_BYTES, urllib_poster
from rackplan.agent.alerts.webhook import WebhookNotifier
from rackplan.agent.core.logging import get_logger
from rackplan.agent.metrics.registry import Metrics
from rackplan.agent.protocol.alerts import FIRING, AlertEvent
from rackplan.agent.settings.sections import WebhookSettings

Answer = Callable[[socket.socket], None]


@pytest.fixture
def serve() -> Iterator[Callable[[Answer], tuple[str, list[float]]]]:
    """A receiver on a free port answering each request with ``answer(conn)``; the times requests came."""
    stop = threading.Event()
    sockets: list[socket.socket] = []

    def start(answer: Answer) -> tuple[str, list[float]]:
        hits: list[float] = []
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(16)
        srv.settimeout(0.2)
        sockets.append(srv)

        def handle(c: socket.socket) -> None:
            try:
                c.settimeout(30)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += c.recv(65536)
                length = int(data.split(b"Content-Length: ", 1)[1].split(b"\r\n", 1)[0])
                body = data.split(b"\r\n\r\n", 1)[1]
                while len(body) < length:
                    body += c.recv(65536)
                hits.append(time.monotonic())
                answer(c)
            except OSError:
                pass
            finally:
                c.close()

        def loop() -> None:
            while not stop.is_set():
                try:
                    c, _ = srv.accept()
                except OSError:
                    continue
                threading.Thread(target=handle, args=(c,), daemon=True).start()

        threading.Thread(target=loop, daemon=True).start()
        return f"http://127.0.0.1:{srv.getsockname()[1]}/api/v2/alerts", hits

    yield start
    stop.set()
    for s in sockets:
        s.close()


def drip(head: bytes, then: bytes, every_s: float = 0.1) -> Answer:
    def answer(c: socket.socket) -> None:
        c.sendall(head)
        for _ in range(600):
            c.sendall(then)
            time.sleep(every_s)

    return answer


def event(key: str = "consumer/g") -> AlertEvent:
    return AlertEvent(key, FIRING, 0.0, 0.5, 0.0, 0.25, "r", 1000.0, 1000.0)


def notifier(url: str, m: Metrics, **kw: Any) -> WebhookNotifier:
    s = WebhookSettings.model_validate(
        {"url": url, "timeout_s": 0.5, "max_attempts": 1, "backoff_initial_s": 0.05, **kw}
    )
    return WebhookNotifier(s, m, get_logger("test"), firing_ttl_s=240)


def test_an_answer_whose_headers_drip_times_out_within_timeout_s(
    serve: Callable[[Answer], tuple[str, list[float]]],
) -> None:
    url, _ = serve(drip(b"HTTP/1.1 200 OK\r\n", b"X"))  # a header line that never ends
    post = urllib_poster(WebhookSettings(url=url))
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        post(url, b"[]", {"Content-Type": "application/json"}, 0.5)
    assert time.monotonic() - t0 < 1.5


def test_a_dripping_body_holds_the_worker_no_longer_than_timeout_s(
    serve: Callable[[Answer], tuple[str, list[float]]],
) -> None:
    url, hits = serve(drip(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n", b"x"))
    m = Metrics()
    n = notifier(url, m, max_attempts=2)
    t0 = time.monotonic()
    n.notify([event("consumer/a")], [], 1000.0)
    n.notify([event("consumer/b")], [], 1000.0)
    assert n.wait_idle(5) and time.monotonic() - t0 < 2.5  # it took for ever (one read per 0.1 s, each fine)
    assert len(hits) == 2  # both batches; the 200 is the answer, the body only drained (as much as in time)
    assert m.get("rackplan_webhook_attempts_total", {"result": "ok"}) == 2
    n.close(1)


def test_close_keeps_its_bound_behind_a_receiver_that_never_finishes(
    serve: Callable[[Answer], tuple[str, list[float]]],
) -> None:
    url, _ = serve(drip(b"HTTP/1.1 200 OK\r\n", b"X"))
    m = Metrics()
    n = notifier(url, m, timeout_s=0.4, max_attempts=3)
    for i in range(3):
        n.notify([event(f"consumer/g{i}")], [], 1000.0)
    time.sleep(0.1)
    t0 = time.monotonic()
    n.close(1.0)  # the runtime passes min(io_timeout_s, 2 x timeout_s): within it, in all
    assert time.monotonic() - t0 < 1.5
    assert m.get("rackplan_webhook_attempts_total", {"result": "error"}) >= 2  # each attempt ended in time


def test_a_huge_answer_is_not_read_into_memory(serve: Callable[[Answer], tuple[str, list[float]]]) -> None:
    size = 64 * 2**20

    def huge(c: socket.socket) -> None:
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
        chunk = b"x" * 2**20
        for _ in range(size // len(chunk)):
            c.sendall(chunk)

    url, _ = serve(huge)
    post = urllib_poster(WebhookSettings(url=url))
    tracemalloc.start()
    try:
        assert post(url, b"[]", {"Content-Type": "application/json"}, 10.0) == 200
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MAX_RESPONSE_BYTES + 2**20, peak  # was the whole 64 MiB
