"""Start-up checks that turn a wrong setting into one line naming it, before the agent runs.

A bootstrap address nobody answers at, a host name that does not resolve, an HTTP port already
taken: each is the operator's to fix, so ``rackplan agent run`` says which setting and exits 2
instead of retrying forever or dying with a socket error.  Once the agent has reached its
brokers, outages are the cluster's and are retried (docs/agent.md); this module is only the
first contact.
"""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Callable
from typing import Any


def bootstrap_hosts(servers: str) -> list[tuple[str, str]]:
    """``(entry, host)`` of every ``[PROTOCOL://]host[:port]`` in ``kafka.bootstrap_servers``."""
    out = []
    for raw in servers.split(","):
        entry = raw.strip()
        rest = entry.split("://", 1)[1] if "://" in entry else entry
        if rest.startswith("["):
            host = rest[1:].partition("]")[0]
        elif rest.count(":") > 1:
            host = rest
        else:
            host = rest.partition(":")[0]
        out.append((entry, host))
    return out


def unresolvable(
    servers: str, resolve: Callable[[str], object] = lambda h: socket.getaddrinfo(h, None)
) -> list[str]:
    """Entries of ``kafka.bootstrap_servers`` whose host has no address, each with the resolver's reason."""
    out = []
    for entry, host in bootstrap_hosts(servers):
        try:
            resolve(host)
        except (socket.gaierror, UnicodeError) as e:
            reason = e.strerror if isinstance(e, socket.gaierror) and e.strerror else str(e)
            out.append(f"{entry} ({reason})")
    return out


def reach_brokers(
    list_topics: Callable[[float], Any],
    servers: str,
    budget_s: float,
    attempt_timeout_s: float,
    backoff_initial_s: float,
    *,
    check_names: bool = True,
    stopped: Callable[[], bool] = lambda: False,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> str | None:
    """Ask for metadata until a broker answers or ``budget_s`` passes; the error line, or None.

    Host names are resolved first (``check_names``): a misspelt one fails at once, not after the
    budget.  Between attempts the delay doubles from ``backoff_initial_s``; each attempt waits at
    most ``attempt_timeout_s`` and never past the budget.
    """
    if check_names:
        bad = unresolvable(servers)
        if bad:
            return f"kafka.bootstrap_servers: cannot resolve {', '.join(bad)}"
    start = clock()
    deadline = start + budget_s
    attempts = 0
    delay = backoff_initial_s
    last = ""
    while not stopped():
        attempts += 1
        try:
            list_topics(max(0.1, min(attempt_timeout_s, deadline - clock())))
            return None
        except Exception as e:  # KafkaException, or whatever a replacement client raises
            last = " ".join(str(e.args[0].str() if e.args and hasattr(e.args[0], "str") else e).split())
        if clock() + delay >= deadline:
            break
        sleep(delay)
        delay *= 2
    if stopped():
        return None
    return (
        f"kafka.bootstrap_servers: no broker answered at {servers} "
        f"({attempts} attempt{'s' if attempts != 1 else ''} in {clock() - start:.1f} s, "
        f"kafka.startup_timeout_s={budget_s:g}; last error: {last}); "
        "check the address, the port and kafka.config (security.protocol), and that the brokers run"
    )


def http_bind_error(e: OSError, host: str, port: int) -> str:
    """The line for an HTTP server that cannot listen, naming ``http.port`` or ``http.host``."""
    reason = e.strerror or str(e)
    if isinstance(e, socket.gaierror):
        return f"http.host: cannot resolve {host!r}: {reason}"
    if e.errno == errno.EADDRINUSE:
        return f"http.port: {host}:{port} is already in use ({reason}); pick a free port, or 0 for any"
    if e.errno == errno.EACCES:
        return f"http.port: not allowed to listen on {host}:{port} ({reason}); use a port above 1023"
    if e.errno == errno.EADDRNOTAVAIL:
        return f"http.host: {host!r} is not an address of this machine ({reason})"
    return f"http.host, http.port: cannot listen on {host}:{port} ({reason})"
