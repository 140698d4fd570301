"""Is the launcher's cluster ready? Judged from what the brokers answer, never from their log files.

The launcher once waited for "Kafka Server started" in every node's current
``server.log``: a log that rolled over (a chatty client floods it) hid that
line, and a cluster whose six brokers all served was reported "not ready
after 120 s".  Readiness is now what clients can do:

- every running node answers an ``ApiVersions`` request on its listener (a
  broker accepts and serves requests only once its start-up has finished;
  Kafka allows ``ApiVersions`` before any SASL handshake, so a secured
  listener answers it too);
- every expected broker is in the cluster's Metadata (in KRaft: registered
  with the controller and unfenced, the brokers a client may be sent to);
- every partition of the internal topics that exist (``__consumer_offsets``,
  ``__transaction_state``) has a leader among those brokers (groups and
  transactions can find their coordinator).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: Kafka's API key of ApiVersions, and the request version every broker since 0.10 answers
_API_VERSIONS = 18
_CLIENT_ID = b"rackplan-it-ready"


def api_versions_answer(host: str, port: int, timeout: float = 2.0) -> bool:
    """One ``ApiVersions`` v0 request on a fresh connection: True when the broker answers it without error."""
    header = struct.pack(">hhih", _API_VERSIONS, 0, 1, len(_CLIENT_ID)) + _CLIENT_ID
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(header)) + header)
            head = _read(s, 4)
            (size,) = struct.unpack(">i", head)
            body = _read(s, min(size, 1 << 20))
    except OSError:
        return False
    # response: correlation id (int32), error code (int16), then the versions
    return len(body) >= 6 and struct.unpack(">ih", body[:6]) == (1, 0)


def _read(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise OSError("connection closed")
        out += chunk
    return out


@dataclass(frozen=True)
class Readiness:
    """What the cluster answered; ``why_not`` is empty when it is ready."""

    brokers: frozenset[int]
    why_not: tuple[str, ...]

    @property
    def ready(self) -> bool:
        return not self.why_not


def internal_topics_without_leader(metadata: Any, brokers: Iterable[int]) -> list[str]:
    """``topic-partition`` of every internal topic's partition whose leader is not one of ``brokers``."""
    live = set(brokers)
    out = []
    for name in sorted(metadata.topics):
        if not name.startswith("__"):
            continue
        for p, pm in sorted(metadata.topics[name].partitions.items()):
            if pm.leader not in live:
                out.append(f"{name}-{p}")
    return out


def judge(
    admin: Callable[[], Any],
    listeners: Mapping[str, tuple[str, int]],
    expect: Iterable[int],
    timeout: float = 5.0,
) -> Readiness:
    """The cluster as clients see it now.

    ``admin``: an AdminClient on the running brokers, made when first needed (once every node
    serves requests: a client made earlier backs off from refused connections); ``listeners``: every
    running node's name and the address it must answer ``ApiVersions`` on; ``expect``: broker ids
    that must be registered.
    """
    why = [
        f"{name} does not answer ApiVersions on {host}:{port}"
        for name, (host, port) in listeners.items()
        if not api_versions_answer(host, port, timeout=min(timeout, 2.0))
    ]
    if why:
        return Readiness(frozenset(), tuple(why))
    try:
        md = admin().list_topics(timeout=timeout)
    except Exception as e:
        return Readiness(frozenset(), (f"no metadata: {e}",))
    brokers = frozenset(md.brokers)
    missing = sorted(set(expect) - brokers)
    if missing:
        why.append(f"brokers {missing} not registered (or fenced)")
    leaderless = internal_topics_without_leader(md, brokers)
    if leaderless:
        why.append(f"no leader for {', '.join(leaderless[:5])}" + (" ..." if len(leaderless) > 5 else ""))
    return Readiness(brokers, tuple(why))
