"""Read-only HTTP: ``/healthz``, ``/readyz``, ``/metrics``, ``/v1/plans``, ``/v1/groups``, ``/v1/groups/<kind>/<name>``.

One asyncio event loop on its own thread holds every connection, and a small
fixed pool renders the answers, so the agent's loop never waits for a scrape
and no client holds a thread: 500 clients that connect and send nothing cost
500 sockets and no threads, and are dropped after ``header_timeout_s``.  The
listen backlog is 128 (the standard library's servers use 5: under 64
concurrent clients, connections were refused).  A client that goes away is
one structlog event, never a traceback.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import socket
import threading
import urllib.parse
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, Protocol

from .logging import get_logger
from .ports import Logger
from .status import StatusView

#: pending connections the kernel queues before the server accepts them
BACKLOG = 128
#: a request's line and headers must arrive within this long (and the next one on a kept-alive connection)
HEADER_TIMEOUT_S = 10.0
#: an answer must be taken by the client within this long
WRITE_TIMEOUT_S = 10.0
#: threads that render answers (metrics, plans); connections never hold one
WORKERS = 4
#: connections held at once; beyond, new ones are closed at once
MAX_CONNECTIONS = 1024
#: request line plus headers
MAX_HEAD_BYTES = 16 * 1024

Answer = tuple[int, bytes, str]


class MetricsSource(Protocol):
    """What renders the Prometheus exposition (:class:`rackplan.agent.metrics.Metrics`: its own lock)."""

    def render(self) -> str: ...


def route(view: StatusView, metrics: MetricsSource, path: str) -> Answer:
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


def _response(code: int, body: bytes, ctype: str, keep_alive: bool, head_only: bool = False) -> bytes:
    reason = HTTPStatus(code).phrase
    head = (
        f"HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
        f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    )
    return head.encode("latin-1") + (b"" if head_only else body)


class _BadRequest(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _parse_head(head: bytes) -> tuple[str, str, bool, bool]:
    """Method, path, keep-alive, has a body: from a request line and headers."""
    try:
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ")
    except ValueError:
        raise _BadRequest(400, "malformed request line") from None
    if not version.startswith("HTTP/1."):
        raise _BadRequest(505, f"unsupported version {version[:16]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip().lower()
    connection = headers.get("connection", "")
    keep_alive = "keep-alive" in connection if version == "HTTP/1.0" else "close" not in connection
    has_body = headers.get("content-length", "0") not in ("", "0") or "transfer-encoding" in headers
    return method, urllib.parse.urlsplit(target).path, keep_alive, has_body


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
        self.backlog = backlog
        self.header_timeout_s = header_timeout_s
        self.max_connections = max_connections
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
        self._conns: set[asyncio.Task[None]] = set()
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
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(5)
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
        for task in list(self._conns):
            task.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)
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
        if len(self._conns) >= self.max_connections:
            writer.transport.abort()
            self.log.warning(
                "http connection refused: too many connections", client=client, limit=self.max_connections
            )
            return
        self._conns.add(task)
        path = None
        try:
            while True:
                path = None
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.header_timeout_s)
                except asyncio.IncompleteReadError as e:
                    if e.partial:
                        self.log.info("http client disconnected", client=client, during="request")
                    return  # closed between requests: the normal end of a kept-alive connection
                except TimeoutError:
                    self.log.debug(
                        "http connection timed out", client=client, timeout_s=self.header_timeout_s
                    )
                    return
                except (asyncio.LimitOverrunError, ValueError):
                    await self._write(
                        writer, _response(431, b"request head too large\n", "text/plain", False)
                    )
                    return
                try:
                    method, path, keep_alive, has_body = _parse_head(head)
                except _BadRequest as e:
                    await self._write(writer, _response(e.code, f"{e}\n".encode(), "text/plain", False))
                    return
                keep_alive = keep_alive and not has_body  # a body is not read: the connection ends here
                if method not in ("GET", "HEAD"):
                    answer: Answer = (405, b"only GET\n", "text/plain")
                else:
                    answer = await self._loop.run_in_executor(self._pool, self.route, path)
                await self._write(writer, _response(*answer, keep_alive, head_only=method == "HEAD"))
                if not keep_alive:
                    return
        except (ConnectionError, TimeoutError) as e:
            self.log.info(
                "http client disconnected",
                client=client,
                path=path,
                during="response",
                error=type(e).__name__,
            )
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug must not kill the server, nor print a traceback into the JSON log
            self.log.error("http request failed", client=client, path=path, error=repr(e))
        finally:
            self._conns.discard(task)
            writer.transport.abort() if writer.transport.is_closing() else writer.close()

    @staticmethod
    async def _write(writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
