"""What may be logged: secrets masked in configs, texts, URLs and JSON-like trees.

One rule for every output (the settings logged at start, every log event,
the webhook's URL): :func:`mask_tree`.  Its own module so that what logs
(:mod:`rackplan.agent.core.logging`, and through it a plan follower) need not load
the settings.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

MASK = "***"
#: key names whose values are secrets: librdkafka properties, HTTP headers, URL query parameters, log fields
_SECRET_KEY = re.compile(
    r"(password|passwd|secret|token|jaas|credential|\.key$|key\.pem|keystore|private|oauthbearer\.config"
    r"|oauthbearer\.extensions|authorization|api[._-]?key|signature|^sig$|^auth$|cookie)",
    re.I,
)
#: keys whose values are file paths (where a secret lives, not the secret)
_PATH_KEY = re.compile(r"(\.location|_files?)$")


def is_secret_key(key: str) -> bool:
    """Keys (librdkafka properties, headers, query parameters, log fields) whose values must never be logged."""
    return bool(_SECRET_KEY.search(key)) and not _PATH_KEY.search(key)


def mask_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a client config with secret values replaced by ``***``."""
    return {k: (MASK if is_secret_key(k) else v) for k, v in sorted(config.items())}


#: ``user:password@`` in a URL anywhere in a text
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@?#]+@")
#: ``name=value`` (a query parameter, a JAAS or OAUTHBEARER option) whose name is secret-bearing
_SECRET_PAIR = re.compile(
    r"(?P<name>[A-Za-z0-9_.\-]+)(?P<eq>\s*=\s*)(?P<value>\"[^\"]*\"|'[^']*'|[^\s&;,\"')}\]]+)"
)


def mask_text(text: str) -> str:
    """Free text with URL credentials and every secret-bearing ``name=value`` masked.

    Catches what a key-based mask cannot: ``clientSecret=...`` inside a
    ``sasl.oauthbearer.config`` string, ``?token=...`` in a URL, a JAAS
    ``password="..."``, whatever message echoes them.
    """
    if "=" not in text and "@" not in text:
        return text
    out = _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    return _SECRET_PAIR.sub(
        lambda m: f"{m['name']}{m['eq']}{MASK}" if is_secret_key(m["name"]) else m.group(0), out
    )


def redact_url(url: str) -> str:
    """A URL safe to log: ``user:password@`` becomes ``***@`` and every query value ``***``.

    Every query value, not only those with a secret-sounding name: an alert
    endpoint's query string is how many receivers take their token.
    """
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = parts.query
    if query:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        query = "&".join(f"{urllib.parse.quote(k, safe='')}={MASK}" for k, _ in pairs) or MASK
    fragment = MASK if parts.fragment else ""
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query, fragment=fragment))


def mask_tree(value: Any, key: str = "") -> Any:
    """A copy of a JSON-like value safe to log: the values of secret-bearing keys masked, URLs redacted.

    One rule for every output (the settings at start, every log event): a
    scalar under a secret-bearing key is ``***``; any other string has its URL
    credentials, query values and secret ``name=value`` pairs masked.
    """
    if isinstance(value, Mapping):
        if key and _PATH_KEY.search(key):  # secret_files, header_files: names -> paths, not secrets
            return {k: v if isinstance(v, str) else mask_tree(v) for k, v in value.items()}
        return {k: mask_tree(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_tree(v, key) for v in value]
    if key and is_secret_key(key) and value is not None:
        return MASK
    if isinstance(value, str):
        if "://" in value and " " not in value:
            return redact_url(value)
        return mask_text(value)
    return value
