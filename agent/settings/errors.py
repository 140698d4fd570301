"""Settings errors: the one error type, and one line naming each bad key for any error (never a value).

Shared by the agent's and the fleet job's settings (``rackplan agent run`` and ``rackplan fleet``
print it and exit 2).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from pydantic import BaseModel, ValidationError

from ..core.errors import AgentError
from .environment import ENV_PREFIX
from .wording import reword, undecodable_variables


class SettingsError(AgentError, ValueError):
    """Settings the agent cannot use: one line naming the key (or the file and line), never a secret."""


#: the trailing location pydantic adds for each member of a union (``config.x.str``, ``config.x.int``)
_UNION_MEMBERS = frozenset({"str", "int", "float", "bool", "none", "json-or-python[json=float,python=float]"})


def describe_errors(
    e: BaseException, model: type[BaseModel] | None = None, environ: Mapping[str, str] | None = None
) -> list[str]:
    """One line per problem, each naming its key (dotted, and the ``RACKPLAN_`` variable that set it),
    in the docs' words (:mod:`.wording`; ``model`` lets an unknown key get its "did you mean");
    input values are never shown, except a short non-secret number or boolean that would not parse."""
    env = os.environ if environ is None else environ
    if not isinstance(e, ValidationError):
        text = str(e)
        flat = " ".join(text.split())
        found = re.fullmatch(r'error parsing value for field "(\w+)" from source "EnvSettingsSource"', flat)
        if found:  # pydantic-settings could not decode a variable holding a list or an object (the first)
            named = [] if model is None else undecodable_variables(model, env)
            if named:
                return [
                    f"{key}: {var} is not valid JSON (a list or a mapping is JSON in the environment)"
                    for key, var in named
                ]
            return [f"{found[1]}: {ENV_PREFIX}{found[1].upper()} (or one of its __ keys) is not valid JSON"]
        return [" ".join(line.split()) for line in text.splitlines() if line.strip()] or [flat]
    by_loc: dict[str, list[str]] = {}
    for err in e.errors(include_url=False, include_input=True, include_context=False):
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p in _UNION_MEMBERS)]
        # An empty location: a whole-model check, whose message names the key itself.
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        for msg in reword(err, loc, model, env).splitlines():
            # A check that names its own keys (``consumer_groups[0].members[1].rak: ...``) keeps them.
            key = "" if not where or msg.startswith(f"{where}[") or msg.startswith(f"{where}.") else where
            if msg not in by_loc.setdefault(key, []):
                by_loc[key].append(msg)
    lines = []
    for where, msgs in by_loc.items():
        lines.extend(msgs if not where else [f"{where}: {' or '.join(msgs)}"])
    return lines


def describe_error(e: BaseException, model: type[BaseModel] | None = None) -> str:
    """:func:`describe_errors` on one line (``; `` between problems), for a log field."""
    return "; ".join(describe_errors(e, model))
