"""A snapshot document's text -> a validated snapshot, or one line saying why not: one rule for everyone.

The listing that counts and chooses the documents (:func:`rackplan.fleet.documents.listing`, both
engines) and the group rows (:func:`rackplan.fleet.units.group_rows`) both call
:func:`parse_document`, so a document is bad for all of them or for none: the unit count announced
before planning is the count planned, and the two engines choose the same documents.

A document is refused (:class:`DocumentError`, an ``invalid`` row) when its text is not JSON, repeats a
key in an object (JSON parsers disagree on which value wins: Spark's takes the first, Python's the
last), holds a string that is not Unicode text (a lone surrogate such as ``"\\ud800"``, or bytes that
are not UTF-8: neither can be written to a table), has a ``schema`` that is not the integer 1, a
``taken_at`` that is not an RFC 3339 time, or breaks :func:`~rackplan.agent.cluster.archive.parse_snapshot`'s
format.  Whatever the snapshot reader raises on malformed data (``ValueError``, ``TypeError``,
``OverflowError``, ``KeyError``, ``IndexError``, ``RecursionError``) is such a refusal: it validates input
from outside, so its exceptions are about the input; any other exception is a bug, and propagates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from rackplan.agent.cluster.archive import FleetSnapshot, parse_snapshot
from rackplan.assignor import InputError, parse_instance


class DocumentError(ValueError):
    """A snapshot document that breaks the format (the message says where)."""


#: what a reader of outside data raises on malformed input (a contract violation, not a bug)
MALFORMED: tuple[type[BaseException], ...] = (
    ValueError,
    TypeError,
    OverflowError,
    KeyError,
    IndexError,
    RecursionError,
)

#: a lone surrogate may hide behind these: a ``\\uD8xx``-``\\uDFxx`` escape, or a byte that was not UTF-8
_SURROGATE = re.compile(r"[\ud800-\udfff]|\\u[dD][89a-fA-F]")


def text_of(value: str | bytes | None) -> str:
    """A document's text: bytes decoded as UTF-8, a byte that is not UTF-8 kept as a lone surrogate
    (``surrogateescape``: :func:`utf8` gives the bytes back, :func:`parse_document` refuses it)."""
    if value is None:
        return ""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def utf8(text: str) -> bytes:
    """The bytes of a document's text (as read: :func:`text_of`'s inverse)."""
    return text.encode("utf-8", "surrogateescape")


def parse_taken_at(text: str | None) -> datetime | None:
    """``taken_at`` as a UTC time (RFC 3339; no offset: UTC), or None when it does not parse."""
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        return None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise DocumentError(f"duplicate key {k!r} in an object")
        out[k] = v
    return out


def _check_text(v: Any) -> None:
    """Every string and key of a parsed document is Unicode text (no lone surrogate)."""
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            try:
                x.encode("utf-8")
            except UnicodeEncodeError:
                raise DocumentError(
                    "a string is not Unicode text (a lone surrogate escape, or bytes that are not UTF-8)"
                ) from None
        elif isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)


def load_json(text: str) -> Any:
    """The JSON value of a document, strictly: :class:`DocumentError` for bad JSON, a repeated key or a
    string that is not Unicode text."""
    try:
        doc = json.loads(text, object_pairs_hook=_unique_keys)
    except DocumentError:
        raise
    except (ValueError, RecursionError) as e:
        raise DocumentError(
            f"not JSON: {e}" if isinstance(e, ValueError) else "JSON nested too deeply"
        ) from None
    if _SURROGATE.search(text):
        _check_text(doc)
    return doc


def parse_document(text: str) -> FleetSnapshot:
    """A validated snapshot from a document's text, or :class:`DocumentError` saying why not."""
    doc = load_json(text)
    if isinstance(doc, dict) and "schema" in doc and type(doc["schema"]) is not int:
        raise DocumentError(f"schema: expected the integer 1, got {type(doc['schema']).__name__}")
    try:
        snap = parse_snapshot(doc)
    except MALFORMED as e:
        raise DocumentError(str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}") from None
    if parse_taken_at(snap.taken_at) is None:
        raise DocumentError(f"taken_at: expected an RFC 3339 time, got {snap.taken_at!r}")
    return snap


def refusal(instance: Callable[[], Any]) -> str | None:
    """Why the contract refuses an instance (``rackplan assign``'s own parser), or None when it accepts it.

    What tells a registration that breaks the contract (an ``invalid`` unit) from a bug (``failed``) once
    something raised on it: ``instance`` builds the instance, and malformed data may break that too.
    """
    try:
        parse_instance(instance())
    except InputError as e:
        return str(e)
    except MALFORMED as e:
        return f"{type(e).__name__}: {e}"
    return None
