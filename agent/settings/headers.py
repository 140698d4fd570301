"""Whether an HTTP header name and value can be sent as they are: checked where the agent loads them.

A value with CR or LF would split the request (header injection), and the
standard library refuses it only when it sends, with an exception whose
message holds the whole value: a bearer token in a traceback, the alert
dropped.  So the settings refuse such a header at load, and a header file
(read at every delivery) is checked again before each request.  The
problems named here never quote the value: it is a secret.
"""

from __future__ import annotations

import re
from pathlib import Path

from rackplan.assignor.bounded import TooLargeError, read_bounded

from ..core.errors import AgentError

#: RFC 9110 ``token``: the characters a field name may hold
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: the largest value sent: a bearer token is a few KiB; a file of MiB is a wrong path
MAX_VALUE_BYTES = 16 * 1024


class HeaderValueError(AgentError, ValueError):
    """A header value that cannot be sent; the message names the problem, never the value."""


def _character(c: str) -> str:
    names = {"\r": "CR", "\n": "LF", "\x00": "NUL", "\x7f": "DEL"}
    return names.get(c, f"U+{ord(c):04X}")


def header_name_problem(name: str) -> str | None:
    """What makes ``name`` no HTTP field name; None: nothing (the name is not a secret: it may be shown)."""
    if not _TOKEN.fullmatch(name):
        return f"{name[:64]!r} is not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)"
    return None


def header_value_problem(value: str) -> str | None:
    """What makes ``value`` unsendable as an HTTP field value; None: nothing.  Never quotes the value."""
    for i, c in enumerate(value):
        if (c < " " and c != "\t") or c == "\x7f":
            return f"the value holds a control character ({_character(c)}) at character {i + 1}"
        if ord(c) > 0xFF:
            return f"the value holds {_character(c)} at character {i + 1}, which HTTP headers cannot carry"
    if len(value) > MAX_VALUE_BYTES:
        return f"the value is {len(value)} characters long, over {MAX_VALUE_BYTES}"
    return None


def header_problem(name: str, value: str) -> str | None:
    """What keeps the header ``name: value`` from being sent, naming the header; None: nothing."""
    problem = header_name_problem(name)
    if problem:
        return problem
    problem = header_value_problem(value)
    return None if problem is None else f"{name}: {problem}"


def read_header_file(path: Path) -> str:
    """The header value a file holds, surrounding whitespace removed (a trailing newline is usual).

    :class:`HeaderValueError` when it cannot be sent (control characters, not UTF-8, too long; the
    file is read no further than that); ``OSError`` when it cannot be read.
    """
    try:
        with open(path, "rb") as f:
            value = read_bounded(f, 4 * MAX_VALUE_BYTES).decode("utf-8").strip()
    except TooLargeError as e:
        raise HeaderValueError(f"the file is {e}") from None
    except UnicodeDecodeError as e:
        raise HeaderValueError(f"the file is not UTF-8 text (byte {e.start + 1})") from None
    problem = header_value_problem(value)
    if problem:
        raise HeaderValueError(problem)
    return value
