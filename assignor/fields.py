"""The contract's field readers: one JSON value checked, or an :class:`InputError` naming where it is.

Shared by every part of the input (:mod:`.parse`: cluster, consumer group, traffic; :mod:`.parse_streams`), so that
one kind of value is refused with one wording wherever it appears, on one line (:func:`one_line`).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable, Mapping

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (issue 29)

if TYPE_CHECKING:
    from typing import Any

#: Kafka's int32 range: broker ids and rack-aware cost weights are Java ``int``s.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
#: Kafka's int64 range: offsets and lags are Java ``long``s.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


def one_line(text: str) -> str:
    """``text`` with every non-printable character escaped, so it prints as exactly one line.

    ``str.splitlines`` splits on more than ``\\n`` (``\\x1c``-``\\x1e``, ``\\x85``,
    U+2028, U+2029 ...); all of those are non-printable, as are lone surrogates,
    which could not even be written to a UTF-8 stream.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def key_path(path: str, key: str) -> str:
    """``path.key`` for identifier-like keys, else ``path["key"]`` with JSON escapes (ASCII only)."""
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"


class HugeInt:
    """A JSON integer with more digits than Python converts (``sys.get_int_max_str_digits``).

    :mod:`rackplan.assignor.cli` decodes such a document again with this placeholder,
    so that an ignored field may hold one and a used field is rejected by
    name (every integer the contract uses is far smaller).
    """

    def __init__(self, digits: str) -> None:
        self.digits = len(digits)


class InputError(ValueError):
    """Invalid input; ``field`` locates it in the document.  The text is always one line."""

    def __init__(self, field: str, message: str) -> None:
        field, message = one_line(field), one_line(message)
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def type_name(v: object) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    names.update({int: "integer", float: "number", HugeInt: "integer"})
    return names.get(type(v), type(v).__name__)


def read_obj(v: object, path: str) -> Mapping[str, Any]:
    if not isinstance(v, dict):
        raise InputError(path, f"expected an object, got {type_name(v)}")
    return v


def read_list(v: object, path: str) -> list[Any]:
    if not isinstance(v, list):
        raise InputError(path, f"expected an array, got {type_name(v)}")
    return v


def read_str(v: object, path: str) -> str:
    if not isinstance(v, str):
        raise InputError(path, f"expected a string, got {type_name(v)}")
    if not v.isascii():
        check_encodable(v, path)
    return v


def check_encodable(v: str, path: str) -> None:
    """Reject lone surrogates: such a string could never be written out as UTF-8."""
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InputError(
            path, f"contains a lone surrogate (U+{ord(v[e.start]):04X}), not valid Unicode"
        ) from None


def read_key(k: str, path: str) -> str:
    """An object key used as a name (topic, tag, task): the same rules as a string value."""
    if not k.isascii():
        check_encodable(k, path)
    return k


def read_rack(v: object, path: str) -> str | None:
    """A client's rack: null or ``""`` mean no rack (Kafka ignores an empty ``client.rack``)."""
    return read_opt_str(v, path) or None


def read_opt_str(v: object, path: str) -> str | None:
    return None if v is None else read_str(v, path)


def read_int(v: object, path: str, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(v, HugeInt):
        raise InputError(path, f"integer of {v.digits} digits is out of range")
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputError(path, f"expected an integer, got {type_name(v)}")
    if minimum is not None and v < minimum:
        raise InputError(path, f"must be at least {minimum}, got {short_int(v)}")
    if maximum is not None and v > maximum:
        raise InputError(path, f"must be at most {maximum}, got {short_int(v)}")
    return v


def short_int(v: int) -> str:
    """An integer for a message: in full unless it is absurdly long."""
    return str(v) if v.bit_length() < 256 else f"an integer of about {int(v.bit_length() * 0.30103)} digits"


def read_bool(v: object, path: str) -> bool:
    if not isinstance(v, bool):
        raise InputError(path, f"expected a boolean, got {type_name(v)}")
    return v


def read_required(o: Mapping[str, Any], key: str, path: str) -> Any:
    if key not in o:
        raise InputError(f"{path}.{key}" if path else key, "missing required field")
    return o[key]


def read_choice(v: object, path: str, choices: tuple[str, ...], default: str | None = None) -> str:
    """One of ``choices``, or ``default`` (when given) for a field absent or null."""
    if v is None and default is not None:
        return default
    s = read_str(v, path)
    if s not in choices:
        raise InputError(path, f"unknown value {s!r}; expected one of {', '.join(choices)}")
    return s


def finite_sum(values: Iterable[float], path: str, what: str) -> None:
    """Refuse bytes/s whose sum is no float: every traffic figure and weight is a sum of some of them.

    Each value may be finite and the total still exceed the largest float (two of ``1e308``); the
    statistics and the load rule's sums would then overflow, so the input is refused here, by name.
    """
    try:
        total = math.fsum(values)
    except OverflowError:
        total = math.inf
    if not math.isfinite(total):
        raise InputError(path, f"{what} add up to more bytes/s than a float holds ({sys.float_info.max:.4g})")


def absent_as(v: object, empty: object) -> object:
    """``v``, or ``empty`` when it is null (absent): never ``v or empty``, which took ``false``, ``0``,
    ``""`` and an empty container of the wrong type for the empty value and so accepted them silently."""
    return empty if v is None else v


def opt_int(
    o: Mapping[str, Any], key: str, path: str, default: int, minimum: int = 0, maximum: int = INT32_MAX
) -> int:
    v = o.get(key)
    return default if v is None else read_int(v, f"{path}.{key}", minimum=minimum, maximum=maximum)
