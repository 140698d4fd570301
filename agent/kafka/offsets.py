"""Log-end offsets by ListOffsets, one answer per partition: what was read, and what failed and why.

A partition whose leader is moving fails on its own; the others still count.
The answers are waited for until the request timeout, all together: a partition
still unanswered then (its leader died since the last metadata poll) is named
``_TIMED_OUT`` and left to the next sample.  Its operation outlives its requests
(:mod:`.timeouts`), so it ends by itself, unwatched, and a dead broker fails the
request, never the process; the cycle no longer waits out that operation's grace.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterable
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from .errors import error_name
from .timeouts import operation_timeout_s

#: a topic and partition
TopicPart = tuple[str, int]


@dataclass(frozen=True, slots=True)
class EndOffsets:
    """The end offsets read, and each partition that gave none with its error's name."""

    ends: dict[TopicPart, int] = field(default_factory=dict)
    failed: dict[TopicPart, str] = field(default_factory=dict)


def end_offsets(admin: Any, partitions: Iterable[TopicPart], timeout_s: float) -> EndOffsets:
    """ListOffsets (``OffsetSpec.latest``) for ``partitions``; never raises for a Kafka error."""
    from confluent_kafka import TopicPartition

    spec: Any = importlib.import_module("confluent_kafka.admin").OffsetSpec
    wanted = sorted(set(partitions))
    out = EndOffsets()
    if not wanted:
        return out
    request = {TopicPartition(t, p): spec.latest() for t, p in wanted}
    try:
        futures = admin.list_offsets(request, request_timeout=operation_timeout_s(timeout_s))
    except Exception as e:  # the request could not even be made (no broker, bad arguments)
        name = error_name(e)
        out.failed.update(dict.fromkeys(wanted, name))
        return out
    deadline = time.monotonic() + timeout_s
    for tp, fut in futures.items():
        key = (tp.topic, tp.partition)
        try:
            out.ends[key] = int(fut.result(timeout=max(0.0, deadline - time.monotonic())).offset)
        except FutureTimeout:  # still asked (a leader just died): its operation ends by itself, unwatched
            out.failed[key] = "_TIMED_OUT"
        except Exception as e:  # one partition's leader moving: the others still count
            out.failed[key] = error_name(e)
    for key in wanted:
        if key not in out.ends and key not in out.failed:
            out.failed[key] = "_NO_ANSWER"
    return out
