"""One bounded JSON decoder for every record the agent and its followers read, and the bounds on numbers.

Anyone who can write a control topic (plans, registrations, lease) can put a
record there, and compaction keeps the last one of a key forever: a record
that crashes its reader stops every agent that replays the topic, restart
after restart.  So each record's value goes through :func:`load_record`:

* at most ``max_bytes`` long (checked before anything is parsed);
* nested at most :data:`MAX_DEPTH` arrays or objects deep, checked on the raw
  bytes before parsing (Python's parser would raise ``RecursionError``, which
  is no ``ValueError`` and took a whole fetch down with it);
* parsed on its own: any failure is a :class:`RecordError` with a bounded
  ``reason`` (a metric label) and a detail for the log, never an exception
  that reaches the next record.

:func:`safe_int` bounds counters read from a topic (generations, epochs,
timestamps) to :data:`MAX_SAFE_INT`, the largest integer every JSON reader
(JavaScript, jq, float64) keeps exact: a forged generation of 10**30 is
refused, not adopted and incremented beyond int64.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..core.errors import AgentError

#: deepest nesting of arrays/objects a control record may have (real records need 5)
MAX_DEPTH = 64
#: 2**53 - 1: integers above it lose precision in float64 JSON readers
MAX_SAFE_INT = 2**53 - 1
#: size bounds per topic (decoded value; a compressed batch may be smaller on the wire)
MAX_PLAN_BYTES = 256 * 1024 * 1024
MAX_REGISTRATION_BYTES = 1024 * 1024
MAX_HEARTBEAT_BYTES = 1024 * 1024

#: labels of rackplan_records_skipped_total{reason}
REASONS = (
    "too_large",
    "too_deep",
    "not_utf8",
    "not_json",
    "not_object",
    "schema",
    "bad_key",
    "key_mismatch",
    "invalid",
    "out_of_range",
    "unsigned",
    "bad_signature",
    "settings_group",
)

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKETS_ONLY = bytes(b for b in range(256) if b not in b"[]{}")
_INNERMOST = re.compile(rb"\[\]|\{\}")


class RecordError(AgentError, ValueError):
    """A record that is not what its topic holds; ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


def nesting_depth_exceeds(value: bytes, limit: int = MAX_DEPTH) -> bool:
    """True when ``value`` nests arrays/objects deeper than ``limit`` (strings ignored).

    Runs in C-speed regex passes over the brackets alone: each pass removes
    every innermost ``[]`` / ``{}`` pair, so a document of depth d empties in
    d passes; one that is not empty after ``limit`` passes is too deep (or
    unbalanced, which the parser refuses anyway).
    """
    brackets = _STRING.sub(b"", value).translate(None, _BRACKETS_ONLY)
    if re.search(rb"[\[{]{%d}" % (limit + 1), brackets):
        return True  # more than ``limit`` openers in a row: the usual poison, found in one pass
    for _ in range(limit):
        if not brackets:
            return False
        reduced = _INNERMOST.sub(b"", brackets)
        if len(reduced) == len(brackets):
            return False  # unbalanced: not JSON, the parser says so
        brackets = reduced
    return bool(brackets)


def load_record(value: bytes, max_bytes: int, what: str) -> Any:
    """The JSON value of a record, bounded in size and depth; :class:`RecordError` otherwise."""
    if len(value) > max_bytes:
        raise RecordError("too_large", f"{what}: {len(value)} bytes exceed the {max_bytes}-byte bound")
    if nesting_depth_exceeds(value):
        raise RecordError("too_deep", f"{what}: nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(value)
    except UnicodeDecodeError:
        raise RecordError("not_utf8", f"{what}: value is not UTF-8") from None
    except (ValueError, RecursionError) as e:
        raise RecordError("not_json", f"{what}: value is not JSON: {str(e)[:200]}") from None


def safe_int(v: Any, what: str, minimum: int = 0) -> int:
    """``v`` as an integer in [minimum, :data:`MAX_SAFE_INT`]; :class:`RecordError` otherwise."""
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        kind = {0: "a non-negative integer", 1: "a positive integer"}.get(minimum, f"an integer >= {minimum}")
        raise RecordError("invalid", f"{what} must be {kind}")
    if v > MAX_SAFE_INT:
        raise RecordError("out_of_range", f"{what} {str(v)[:40]} exceeds 2**53-1, the bound on counters")
    return v
