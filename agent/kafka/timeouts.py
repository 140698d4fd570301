"""Timeouts of Admin API operations that never let an operation expire before its own requests.

librdkafka 2.16 can abort the whole process (``rd_kafka_enq_once_del_source_return:
Assertion `eonce->refcnt > 0' failed``, confluentinc/librdkafka#4605) when an admin
operation times out while one of its protocol requests is still in flight and the
late response ("Dropping outdated ... Response") is then handled.  A request lives at
most ``socket.timeout.ms`` (plus the broker thread's once-a-second timeout scan), so the
agent's admin client gets ``socket.timeout.ms`` no longer than the agent's own request
timeout, and every operation a grace period beyond it: a slow or dead broker then fails
the *request*, whose error reaches a still-living operation, the path librdkafka handles.
The agent still waits no longer than before for a result it can use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: How much longer an operation lives than its longest request (librdkafka scans for timed-out
#: requests once a second; the rest is slack for a loaded machine).
OPERATION_GRACE_S = 5.0
#: librdkafka's bounds of ``socket.timeout.ms``.
_SOCKET_TIMEOUT_MS = (10, 300_000)


def admin_client_config(config: Mapping[str, Any], request_timeout_s: float) -> dict[str, Any]:
    """``config`` with ``socket.timeout.ms`` capped at the request timeout (a user's lower value is kept).

    A value librdkafka would refuse (not a whole number, or outside its bounds) is passed on as it is,
    so that librdkafka refuses it and the agent says so naming ``kafka.config`` (exit 2): read with
    ``int()`` here, ``abc`` gave a message naming no setting, and ``-5`` was quietly made 10 ms.
    """
    out = dict(config)
    current = _whole(out.get("socket.timeout.ms", 60_000))
    if current is None or not _SOCKET_TIMEOUT_MS[0] <= current <= _SOCKET_TIMEOUT_MS[1]:
        return out
    cap = int(request_timeout_s * 1000)
    out["socket.timeout.ms"] = max(_SOCKET_TIMEOUT_MS[0], min(current, cap))
    return out


def _whole(value: object) -> int | None:
    """A whole number as librdkafka reads an integer property (an int, or its decimal digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = value.strip() if isinstance(value, str) else ""
    digits = text[1:] if text[:1] in "+-" else text
    return int(text) if digits.isascii() and digits.isdigit() else None


def operation_timeout_s(request_timeout_s: float) -> float:
    """The ``request_timeout`` to give an admin operation: longer than any request it sends."""
    return request_timeout_s + OPERATION_GRACE_S


def result_timeout_s(request_timeout_s: float) -> float:
    """How long to wait on an operation's future: it resolves by then, with a result or an error."""
    return operation_timeout_s(request_timeout_s) + OPERATION_GRACE_S
