"""Read-only HTTP: ``/healthz``, ``/readyz``, ``/metrics``, ``/v1/plans``, ``/v1/groups``.

A standard-library threading server on its own thread: the agent's loop never
waits for a scrape, and a slow client never delays a poll.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .loop import Agent


def _plans(agent: Agent) -> dict[str, Any]:
    """The agent's plans of record; a key whose newest record on the plan topic someone else wrote (what
    followers read then) carries ``discrepancy``: that record's writer, generation, offset, tombstone."""
    out: dict[str, Any] = {
        k: rec.value() for k in agent.book.live_keys() if (rec := agent.book.latest(k)) is not None
    }
    for key, seen in sorted(dict(agent.discrepancies).items()):
        out.setdefault(key, {})["discrepancy"] = seen
    return out


def _groups(agent: Agent) -> list[dict[str, Any]]:
    """Registrations (with where they came from) and, last, those that cannot be used and why."""
    firing = set(agent.alerts.firing())
    handovers = dict(agent.handovers)
    out = []
    for reg in list(agent.regs):
        rec = agent.book.latest(reg.key)
        followers = agent.store.followers(reg.kind, reg.name)
        pending = handovers.get(reg.key)
        out.append(
            {
                "key": reg.key,
                "kind": reg.kind,
                "name": reg.name,
                "source": reg.source,
                "members": reg.members,
                "fetch_mode": reg.fetch_mode,
                "topics": sorted(reg.topics),
                "generation": None if rec is None else rec.generation,
                "locality": None if rec is None else rec.locality_after.as_json(),
                "alert_firing": reg.key in firing,
                "state": None if rec is None else rec.state,
                "followers": {
                    m: {"mode": f.mode, "released_generation": f.released_generation}
                    for m, f in followers.items()
                },
                "handover": None
                if pending is None
                else {
                    "revoking_generation": pending.generation,
                    "awaiting": list(pending.awaiting),
                    "outstanding": pending.outstanding(followers),
                },
            }
        )
    for key, reason in sorted(dict(agent.problems).items()):
        kind, _, name = key.partition("/")
        out.append({"key": key, "kind": kind, "name": name, "problem": reason})
    return out


class AgentHttpServer:
    def __init__(self, agent: Agent, host: str, port: int) -> None:
        agent_ref = agent

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet: scrapes are not news
                return

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _json(self, code: int, doc: Any) -> None:
                self._send(code, json.dumps(doc, separators=(",", ":")).encode(), "application/json")

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/healthz":
                    self._send(200, b"ok\n", "text/plain")
                elif path == "/readyz":
                    # Ready once the plan topic was replayed and a first complete snapshot taken.
                    ready = agent_ref.ready
                    self._send(200 if ready else 503, b"ready\n" if ready else b"not ready\n", "text/plain")
                elif path == "/metrics":
                    body = agent_ref.metrics.render().encode()
                    self._send(200, body, "text/plain; version=0.0.4; charset=utf-8")
                elif path == "/v1/plans":
                    self._json(200, _plans(agent_ref))
                elif path == "/v1/groups":
                    self._json(200, _groups(agent_ref))
                else:
                    self._json(404, {"error": f"no such path {path}"})

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        # A short poll interval: shutting down (SIGTERM) waits at most this long for the server thread.
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name="rackplan-http", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
