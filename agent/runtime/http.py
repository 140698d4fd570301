"""Read-only HTTP: ``/healthz``, ``/readyz``, ``/metrics``, ``/v1/plans``, ``/v1/status``, ``/v1/groups``, ``/v1/groups/<kind>/<name>``.

One asyncio event loop on its own thread holds every connection, and a small
fixed pool renders the answers, so the agent's loop never waits for a scrape
and no client holds a thread: 500 clients that connect and send nothing cost
500 sockets and no threads, and are dropped after ``header_timeout_s``.  The
listen backlog is 128 (the standard library's servers use 5: under 64
concurrent clients, connections were refused).  A client that goes away is
one structlog event, never a traceback.

At the connection limit a new connection closes the one that has waited
longest for its next request (idle keep-alive, or a head still arriving),
as nginx and Go's server do with idle connections, instead of being refused:
1,030 kept-alive clients made every ``/healthz`` probe fail.  Only when every
connection is busy answering is the new one refused.  The limit leaves
:data:`FD_RESERVE` descriptors of the process's own limit to the rest of the
agent, so ``accept()`` never fails with EMFILE first.

h11 (sans-I/O, the HTTP/1.1 library under uvicorn and httpx) parses the
requests and frames the answers; this module keeps the connections, the
timeouts and the limits.  The standard library's ``ThreadingHTTPServer`` was
the other candidate: a thread per connection (docs/performance.md#metrics-exposition).
``/metrics`` is answered in the format and encoding the request negotiates
(:mod:`rackplan.agent.metrics.exposition`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import math
import resource
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Protocol, TypeVar

import h11

from ..core.logging import get_logger
from ..core.ports import Logger
from ..cycle.status import StatusView
from ..metrics.exposition import Exposition

#: pending connections the kernel queues before the server accepts them
BACKLOG = 128
#: a request's line and headers must arrive within this long (and the next one on a kept-alive connection)
HEADER_TIMEOUT_S = 10.0
#: an answer must be taken by the client within this long
WRITE_TIMEOUT_S = 10.0
#: threads that render answers (metrics, plans); connections never hold one
WORKERS = 4
#: connections held at once; beyond, a new one closes the longest-idle one (or is closed when none is idle)
MAX_CONNECTIONS = 1024
#: file descriptors of the process's limit left to everything else (Kafka clients, files, the listener)
FD_RESERVE = 256
#: at most one "connection limit reached" event this often, with the count since the last one
LIMIT_LOG_INTERVAL_S = 60.0
#: request line plus headers
MAX_HEAD_BYTES = 16 * 1024
#: bytes read from a socket at a time
READ_BYTES = 64 * 1024

Answer = tuple[int, bytes, str]
K = TypeVar("K")
#: the methods every path answers (a 405's ``Allow``, RFC 9110 15.5.6)
ALLOWED_METHODS = "GET, HEAD"


def request_path(target: str) -> str:
    """The path of a request target: an origin-form one (``/x?q``) up to its query, as it is;
    an absolute-form one (``http://host/x``), its path. ``urlsplit`` alone reads ``//x`` as a
    host and ``//[`` as a bad IPv6 address, so those paths were answered wrongly or not at all."""
    if target.startswith("/"):
        return target.partition("?")[0].partition("#")[0]
    try:
        return urllib.parse.urlsplit(target).path
    except ValueError:
        return target


class MetricsText(Protocol):
    """What renders the Prometheus exposition as text (:func:`route`'s ``/metrics``)."""

    def render(self) -> str: ...


class MetricsSource(MetricsText, Protocol):
    """What the server's ``/metrics`` negotiates with (:class:`rackplan.agent.metrics.registry.Metrics`: its
    own lock)."""

    def exposition(self, accept: str | None, accept_encoding: str | None) -> Exposition:
        """The format ``Accept`` asks for (OpenMetrics or text 0.0.4), gzipped if ``Accept-Encoding`` allows."""
        ...


def route(view: StatusView, metrics: MetricsText, path: str) -> Answer:
    """The answer to ``GET path`` from one status view: status, body, content type."""
    if path == "/healthz":
        return 200, b"ok\n", "text/plain"
    if path == "/readyz":
        # Ready once the plan topic was replayed and a first complete snapshot taken.
        return (200, b"ready\n", "text/plain") if view.ready else (503, b"not ready\n", "text/plain")
    if path == "/metrics":
        return 200, metrics.render().encode(), "text/plain; version=0.0.4; charset=utf-8"
    if path == "/v1/plans":
        return _json(200, view.plans_json())
    if path == "/v1/status":
        return _json(200, view.status_json())
    if path == "/v1/groups":
        return _json(200, view.groups_json())
    parts = path.split("/")
    if len(parts) == 5 and parts[:3] == ["", "v1", "groups"]:
        kind, name = urllib.parse.unquote(parts[3]), urllib.parse.unquote(parts[4])
        group = view.group_json(kind, name)
        if group is not None:
            return _json(200, group)
        return _json(404, {"error": f"no such group {kind}/{name}"})
    return _json(404, {"error": f"no such path {path}"})


def _json(code: int, doc: Any) -> Answer:
    return code, json.dumps(doc, separators=(",", ":")).encode(), "application/json"


def _head(code: int, ctype: str, length: int, close: bool, encoding: str | None = None) -> h11.Response:
    headers = [("Content-Type", ctype), ("Content-Length", str(length))]
    if encoding is not None:
        headers += [("Content-Encoding", encoding), ("Vary", "Accept, Accept-Encoding")]
    if code == 405:
        headers.append(("Allow", ALLOWED_METHODS))
    # h11 turns keep-alive into close where it must (HTTP/1.0, a "Connection: close" request)
    headers.append(("Connection", "close" if close else "keep-alive"))
    return h11.Response(status_code=code, headers=headers, reason=HTTPStatus(code).phrase)


def connection_limit(wanted: int, soft_fd_limit: int | None = None) -> int:
    """``wanted`` connections, or fewer if the descriptor limit (``RLIMIT_NOFILE``'s soft value) is lower:
    a connection refused by :func:`longest_idle`'s rule beats an ``accept()`` failing with EMFILE, which
    makes asyncio stop accepting anything for a second, probes included."""
    if soft_fd_limit is None:
        soft_fd_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft_fd_limit == resource.RLIM_INFINITY or soft_fd_limit < 0:
        return wanted
    return max(1, min(wanted, soft_fd_limit - FD_RESERVE))


@dataclass
class _Conn:
    """One connection: whom, and since when it waits for a request head (None while it is answered)."""

    writer: asyncio.StreamWriter
    client: str
    idle_since: float | None
    #: the path of the request being answered, for the log
    path: str | None = None


def longest_idle(conns: Mapping[K, _Conn]) -> K | None:
    """The key of the connection that has waited longest for a request; None when all are being answered."""
    best: K | None = None
    since = math.inf
    for key, conn in conns.items():
        if conn.idle_since is not None and conn.idle_since < since:
            best, since = key, conn.idle_since
    return best


def _has_body(request: h11.Request) -> bool:
    """A request that declares a body: it is not read, so the connection ends after the answer."""
    for name, value in request.headers:
        if name == b"transfer-encoding" or (name == b"content-length" and value not in (b"", b"0")):
            return True
    return False


class AgentHttpServer:
    """The agent's HTTP server; :attr:`port` is bound once constructed (``OSError`` when it cannot be)."""

    def __init__(
        self,
        status: Callable[[], StatusView],
        metrics: MetricsSource,
        host: str,
        port: int,
        *,
        backlog: int = BACKLOG,
        header_timeout_s: float = HEADER_TIMEOUT_S,
        workers: int = WORKERS,
        max_connections: int = MAX_CONNECTIONS,
        log: Logger | None = None,
    ) -> None:
        """``status``: the agent's current view (read once per request); ``metrics``: what ``/metrics`` renders."""
        self.route: Callable[[str], Answer] = lambda path: route(status(), metrics, path)
        self.metrics = metrics
        self.backlog = backlog
        self.header_timeout_s = header_timeout_s
        self.max_connections = connection_limit(max_connections)
        #: connections closed to make room for a new one (the longest idle each time)
        self.evicted = 0
        self._evicted_unlogged = 0
        self._limit_logged_at = -math.inf
        self.log: Logger = log if log is not None else get_logger("rackplan.http")
        family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][
            0
        ]
        self._sock = socket.create_server((host, port), family=family, backlog=backlog)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="rackplan-http"
        )
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(self._loop_error)
        self._server: asyncio.AbstractServer | None = None
        self._conns: dict[asyncio.Task[None], _Conn] = {}
        #: evicted connections whose task has not ended yet (no longer counted against the limit)
        self._evicted: set[asyncio.Task[None]] = set()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="rackplan-http", daemon=True)

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    def start(self) -> None:
        self._thread.start()
        self._started.wait(10)

    def close(self) -> None:
        if self._thread.is_alive():
            # Wait for the loop's thread, not the coroutine's future: _shutdown stops the loop, and a
            # stopped loop never runs the callback that would complete that future (a 5 s wait, each close).
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
            self._thread.join(5)
        else:
            self._sock.close()
            self._loop.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ---- the event loop's thread ----------------------------------------------

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(
                    self._connection, sock=self._sock, backlog=self.backlog, limit=MAX_HEAD_BYTES
                )
            )
            self._started.set()
            self._loop.run_forever()
        finally:
            self._started.set()
            self._loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = [*self._conns, *self._evicted]  # evicted ones may not have seen their end yet
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loop.stop()

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        # asyncio's default handler prints a traceback: one event instead.
        exc = context.get("exception")
        self.log.warning(
            "http server error", message=context.get("message"), error=None if exc is None else repr(exc)
        )

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = writer.get_extra_info("peername")
        client = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        if len(self._conns) >= self.max_connections and not self._evict_longest_idle():
            writer.transport.abort()
            self.log.warning(
                "http connection refused: every connection is busy answering",
                client=client,
                limit=self.max_connections,
            )
            return
        conn = _Conn(writer, client, time.monotonic())
        self._conns[task] = conn
        try:
            await self._requests(reader, conn)
        except (ConnectionError, TimeoutError) as e:
            self.log.info(
                "http client disconnected",
                client=client,
                path=conn.path,
                during="response",
                error=type(e).__name__,
            )
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug must not kill the server, nor print a traceback into the JSON log
            self.log.error("http request failed", client=client, path=conn.path, error=repr(e))
        finally:
            self._conns.pop(task, None)
            self._evicted.discard(task)
            writer.transport.abort() if writer.transport.is_closing() else writer.close()

    async def _requests(self, reader: asyncio.StreamReader, conn: _Conn) -> None:
        """Answer one connection's requests in order (h11 parses them) until it closes, errs or times out."""
        http = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        while True:
            conn.path, conn.idle_since = None, time.monotonic()
            try:
                request = await self._next_request(reader, http, conn)
            except h11.RemoteProtocolError as e:  # malformed, or a head over MAX_HEAD_BYTES (431)
                code = e.error_status_hint
                body = b"request head too large\n" if code == 431 else b"malformed request\n"
                await self._answer(conn.writer, http, code, body, "text/plain")
                return
            if request is None:
                return
            conn.idle_since = None  # being answered: never evicted
            await self._respond(request, http, conn)
            if http.our_state is not h11.DONE or http.their_state is not h11.DONE:
                return  # HTTP/1.0, Connection: close, an unread body or a refused version: h11 closes
            http.start_next_cycle()

    async def _respond(self, request: h11.Request, http: h11.Connection, conn: _Conn) -> None:
        """Answer one request: its path's answer from the render pool, or 405 or 505."""
        conn.path = request_path(request.target.decode("latin-1"))
        close = _has_body(request)  # a body is not read: the connection ends with this answer
        if not close:
            http.next_event()  # the request's EndOfMessage
        version = "HTTP/" + request.http_version.decode("latin-1")
        if version not in ("HTTP/1.0", "HTTP/1.1"):
            await self._answer(
                conn.writer, http, 505, f"unsupported version {version!r}\n".encode(), "text/plain"
            )
            return
        encoding: str | None = None
        if request.method not in (b"GET", b"HEAD"):
            answer: Answer = (405, b"only GET\n", "text/plain")
        elif conn.path == "/metrics":
            headers = {name: value.decode("latin-1") for name, value in request.headers}
            metrics = await self._loop.run_in_executor(
                self._pool, self.metrics.exposition, headers.get(b"accept"), headers.get(b"accept-encoding")
            )
            answer, encoding = (200, metrics.body, metrics.content_type), metrics.content_encoding
        else:
            answer = await self._loop.run_in_executor(self._pool, self.route, conn.path)
        head_only = request.method == b"HEAD"
        await self._answer(conn.writer, http, *answer, close=close, head_only=head_only, encoding=encoding)

    async def _next_request(
        self, reader: asyncio.StreamReader, http: h11.Connection, conn: _Conn
    ) -> h11.Request | None:
        """The next request's head, whole within ``header_timeout_s``; None once the client closed or is too slow."""
        deadline = time.monotonic() + self.header_timeout_s
        received = len(http.trailing_data[0])  # a pipelined request may be buffered already
        while True:
            event = http.next_event()
            if isinstance(event, h11.Request):
                # h11 bounds only a head still incomplete: one that arrived whole is measured here
                if received - len(http.trailing_data[0]) > MAX_HEAD_BYTES:
                    raise h11.RemoteProtocolError("request head too large", 431)
                return event
            if event is not h11.NEED_DATA:
                return None  # ConnectionClosed
            try:
                data = await asyncio.wait_for(reader.read(READ_BYTES), deadline - time.monotonic())
            except TimeoutError:
                self.log.debug(
                    "http connection timed out", client=conn.client, timeout_s=self.header_timeout_s
                )
                return None
            if not data:
                if http.trailing_data[0]:  # part of a request had come
                    self.log.info("http client disconnected", client=conn.client, during="request")
                return None  # else closed between requests: the normal end of a kept-alive connection
            received += len(data)
            http.receive_data(data)

    @staticmethod
    async def _answer(
        writer: asyncio.StreamWriter,
        http: h11.Connection,
        code: int,
        body: bytes,
        ctype: str,
        *,
        close: bool = True,
        head_only: bool = False,
        encoding: str | None = None,
    ) -> None:
        data = http.send(_head(code, ctype, len(body), close, encoding)) or b""
        if not head_only:
            data += http.send(h11.Data(data=body)) or b""
        data += http.send(h11.EndOfMessage()) or b""
        writer.write(data)
        await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)

    def _evict_longest_idle(self) -> bool:
        """Close the connection that has waited longest for a request, making room; False: none waits."""
        victim = longest_idle(self._conns)
        if victim is None:
            return False
        conn = self._conns.pop(victim)
        self._evicted.add(victim)
        conn.writer.transport.abort()  # its task sees the end of the stream and returns
        self.evicted += 1
        self._evicted_unlogged += 1
        now = time.monotonic()
        if now - self._limit_logged_at >= LIMIT_LOG_INTERVAL_S:
            self.log.warning(
                "http connection limit reached: longest-idle connections closed for new ones",
                limit=self.max_connections,
                closed=self._evicted_unlogged,
                client=conn.client,
                idle_s=None if conn.idle_since is None else round(now - conn.idle_since, 3),
            )
            self._limit_logged_at, self._evicted_unlogged = now, 0
        return True
