"""Settings errors: the one error type, and one line naming each bad key for any error (never a value).

Shared by the agent's and the fleet job's settings (``rackplan agent run`` and ``rackplan fleet``
print it and exit 2).
"""

from __future__ import annotations

import re

from pydantic import ValidationError

from ..core.errors import AgentError
from .environment import ENV_PREFIX


class SettingsError(AgentError, ValueError):
    """Settings the agent cannot use: one line naming the key (or the file and line), never a secret."""


#: the trailing location pydantic adds for each member of a union (``config.x.str``, ``config.x.int``)
_UNION_MEMBERS = frozenset({"str", "int", "float", "bool", "none", "json-or-python[json=float,python=float]"})


def describe_error(e: BaseException) -> str:
    """One line for any settings error, naming each key; input values are never shown (secrets)."""
    if not isinstance(e, ValidationError):
        text = " ".join(str(e).split())
        env = re.fullmatch(r'error parsing value for field "(\w+)" from source "EnvSettingsSource"', text)
        if env:  # pydantic-settings could not decode a variable holding a list or an object
            return f"{env[1]}: {ENV_PREFIX}{env[1].upper()} (or one of its __ keys) is not valid JSON"
        return text
    by_loc: dict[str, list[str]] = {}
    for err in e.errors(include_url=False, include_input=False, include_context=False):
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p in _UNION_MEMBERS)]
        # An empty location: a whole-model check, whose message names the key itself.
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        msg = str(err["msg"]).removeprefix("Value error, ")
        if msg not in by_loc.setdefault(where, []):
            by_loc[where].append(msg)
    return "; ".join(f"{where}: {' or '.join(m)}" if where else " or ".join(m) for where, m in by_loc.items())
