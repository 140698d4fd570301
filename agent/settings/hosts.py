"""Host names and bootstrap entries, checked as the settings check them (``kafka.bootstrap_servers``, ``http.host``)."""

from __future__ import annotations

import ipaddress
import re

_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9_-]{1,63}(?<!-)")


def is_host(text: str) -> bool:
    """An IP address (v4, v6) or a host name by RFC 1123 (``_`` allowed, as DNS in practice does)."""
    try:
        ipaddress.ip_address(text.strip("[]"))
        return True
    except ValueError:
        pass
    name = text.removesuffix(".")
    return 0 < len(name) <= 253 and all(_HOST_LABEL.fullmatch(label) for label in name.split("."))


def bootstrap_problem(entry: str) -> str | None:
    """What is wrong with one ``[PROTOCOL://]host[:port]`` of ``kafka.bootstrap_servers``; None: nothing."""
    rest = entry.split("://", 1)[1] if "://" in entry else entry
    if rest.startswith("["):  # [v6]:port
        host, _, port = rest[1:].partition("]")
        port = port.removeprefix(":")
    elif rest.count(":") > 1:  # a bare IPv6 address has no port
        host, port = rest, ""
    else:
        host, _, port = rest.partition(":")
    if not is_host(host):
        return "not a host name or address"
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        return f"port {port[:16]!r} is not 1-65535"
    return None
