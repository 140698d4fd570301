"""pydantic's error messages in the words docs/settings.md uses: ``unknown key`` (with "did you mean"),
``expected a number, got 'soon'``, and the environment variable that set the key.

Kept apart from :mod:`.errors` (which gathers the lines) so each rule is one small function of values.
"""

from __future__ import annotations

import difflib
import json
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

from ..core.redact import is_secret_key
from .environment import ENV_PREFIX

#: pydantic error types whose input is a short scalar the operator typed: shown back, unless secret-bearing
_EXPECTED = {
    "float_parsing": "a number",
    "float_type": "a number",
    "int_parsing": "a whole number",
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "bool_parsing": "true or false",
    "bool_type": "true or false",
}

#: at most this many characters of a value are echoed (a number or a boolean is never longer)
_MAX_ECHO = 32


def did_you_mean(key: object, allowed: Iterable[str]) -> str:
    """``; did you mean port?`` for the closest allowed key (difflib), or an empty string."""
    close = difflib.get_close_matches(str(key), sorted(allowed), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def _members(tp: Any) -> tuple[Any, ...]:
    """The types a value of ``tp`` may be: a union's members (``None`` dropped), else ``tp``."""
    if get_origin(tp) in (Union, types.UnionType):
        return tuple(a for a in get_args(tp) if a is not type(None))
    return (tp,)


def _model_of(tp: Any) -> type[BaseModel] | None:
    for member in _members(tp):
        if isinstance(member, type) and issubclass(member, BaseModel):
            return member
    return None


def allowed_keys(model: type[BaseModel], parent: Sequence[str | int]) -> list[str] | None:
    """The keys a model allows at ``parent`` (a pydantic location), or None where it is no model."""
    tp: Any = model
    for part in parent:
        if isinstance(part, int):
            items = [a for m in _members(tp) for a in get_args(m) if a is not Ellipsis]
            tp = items[0] if items else None
            continue
        sub = _model_of(tp)
        if sub is None or part not in sub.model_fields:
            return None
        tp = sub.model_fields[part].annotation
    found = _model_of(tp)
    return sorted(found.model_fields) if found is not None else None


def env_variable(loc: Sequence[str | int], environ: Mapping[str, str]) -> str | None:
    """The ``RACKPLAN_`` variable that set the key at ``loc``: ``RACKPLAN_HTTP__PORT``, or
    ``RACKPLAN_HTTP`` when its JSON holds ``port``; None when the value came from the file."""
    keys: list[str] = []
    for part in loc:  # inside a list, the list came whole from one variable
        if not isinstance(part, str):
            break
        keys.append(part)
    names = {n.upper(): n for n in environ}
    for depth in range(len(keys), 0, -1):
        name = (ENV_PREFIX + "__".join(keys[:depth])).upper()
        if name not in names:
            continue
        if depth == len(keys) or _json_holds(environ[names[name]], keys[depth:]):
            return name
    # A variable below the key set part of it (``RACKPLAN_CONSUMER_GROUPS__0__GROUP_ID`` makes
    # ``consumer_groups`` a mapping, refused as no list): name the first such one.
    below = (ENV_PREFIX + "__".join(keys) + "__").upper() if keys else None
    return next((n for n in sorted(names) if below is not None and n.startswith(below)), None)


def _decoded(model: type[BaseModel], keys: Sequence[str]) -> bool:
    """Whether the environment gives the key at ``keys`` as JSON: a list, a mapping or a section (not a
    string, nor a key inside a plain mapping such as ``kafka.config``)."""
    tp: Any = model
    for key in keys:
        sub = _model_of(tp)
        if sub is None or key not in sub.model_fields:
            return False
        tp = sub.model_fields[key].annotation
    return any(
        _model_of(m) is not None or (get_origin(m) or m) in (list, dict, tuple, set, frozenset)
        for m in _members(tp)
    )


def undecodable_variables(model: type[BaseModel], environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """The ``RACKPLAN_`` variables that should hold JSON (:func:`_decoded`) and do not: (dotted key, variable)."""
    out = []
    for name in sorted(environ):
        if not name.upper().startswith(ENV_PREFIX):
            continue
        keys = name[len(ENV_PREFIX) :].lower().split("__")
        if _decoded(model, keys):
            try:
                json.loads(environ[name])
            except ValueError:
                out.append((".".join(keys), name))
    return out


def _json_holds(text: str, path: Sequence[str]) -> bool:
    try:
        node: Any = json.loads(text)
    except ValueError:
        return False
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def reword(
    err: Mapping[str, Any],
    loc: Sequence[str | int],
    model: type[BaseModel] | None,
    environ: Mapping[str, str],
) -> str:
    """One pydantic error's message in the docs' words; the value only where it is safe to echo."""
    kind = str(err.get("type", ""))
    msg = str(err["msg"]).removeprefix("Value error, ")
    if kind == "extra_forbidden":
        allowed = allowed_keys(model, loc[:-1]) if model is not None and loc else None
        msg = "unknown key" + (did_you_mean(loc[-1], allowed) if allowed else "")
    elif kind in _EXPECTED:
        value = err.get("input")
        secret = any(isinstance(p, str) and is_secret_key(p) for p in loc)
        shown = isinstance(value, str) and len(value) <= _MAX_ECHO and not secret
        msg = f"expected {_EXPECTED[kind]}" + (f", got {value!r}" if shown else "")
    variable = env_variable(loc, environ) if loc else None
    if variable is None:
        return msg
    return "\n".join(f"{line} (environment variable {variable})" for line in msg.splitlines())
