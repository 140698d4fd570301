"""Record authentication on the plan and lease topics: an HMAC over the record, in the ``rackplan-mac`` header.

Why: the writer headers (``rackplan-agent``, ``rackplan-lease-group``) are
public; a forger with Write on the plan topic copies them, and a follower
cannot tell its plan from the agent's (issue 24, item 8).  With the shared
secret that signs registrations (the agent's ``registrations.secret_file``,
the follower's ``registration_secret_file``, Java's
``rackplan.registration.secret.file``), the agent puts on every record it
writes the header :data:`MAC_HEADER` = ``hmac-sha256:<64 hex>``, the
HMAC-SHA256 with that secret of :func:`mac_input`: the topic, the key and
the value (a tombstone included), each length-prefixed, so no record can be
moved to another topic or key, nor have its value changed, and keep a valid
MAC.  Readers that hold the secret refuse a record without a valid one
(reason ``unsigned`` / ``bad_signature``).  Without a secret nothing is
signed nor checked: the records are unauthenticated (docs/security.md).

Pure: the producer (:class:`rackplan.agent.kafka.publisher.Publisher`) adds the
header, every reader calls :func:`check_mac`.  The Java client implements the
same rule (``dev.rackplan.kafka.RecordMac``); tests/agent/test_forged_records.py pins a
known answer both sides share.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Iterable

from .records import RecordError

#: the Kafka header that carries a record's MAC
MAC_HEADER = "rackplan-mac"
_PREFIX = b"hmac-sha256:"
_DOMAIN = b"rackplan-mac-v1"
#: the length field of an absent value (a tombstone): no byte string has this length
_NULL = 0xFFFFFFFF


def _field(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def mac_input(topic: str, key: bytes | None, value: bytes | None) -> bytes:
    """What a MAC covers: ``"rackplan-mac-v1"``, then the topic, the key and the value, each as a 4-byte
    big-endian length and its bytes; a missing key is empty, a missing value (tombstone) is the length
    ``0xFFFFFFFF`` alone."""
    tail = struct.pack(">I", _NULL) if value is None else _field(value)
    return _field(_DOMAIN) + _field(topic.encode()) + _field(key or b"") + tail


def record_mac(secret: bytes, topic: str, key: bytes | None, value: bytes | None) -> bytes:
    """The :data:`MAC_HEADER` value of a record: ``hmac-sha256:`` and the HMAC-SHA256 in lowercase hex."""
    digest = hmac.new(secret, mac_input(topic, key, value), hashlib.sha256).hexdigest()
    return _PREFIX + digest.encode()


def mac_of(headers: Iterable[tuple[str, bytes | None]]) -> bytes | None:
    """The last :data:`MAC_HEADER` value among ``headers`` (None when absent)."""
    out = None
    for k, v in headers:
        if k == MAC_HEADER:
            out = v or b""
    return out


def check_mac(
    secret: bytes | None, topic: str, key: bytes | None, value: bytes | None, mac: bytes | None, what: str
) -> None:
    """Nothing when ``secret`` is None or ``mac`` is the record's; :class:`RecordError` otherwise
    (reason ``unsigned``: no MAC; ``bad_signature``: a wrong one)."""
    if secret is None:
        return
    if not mac:
        raise RecordError("unsigned", f"{what}: no {MAC_HEADER} header and a secret is set (not the agent's)")
    if not hmac.compare_digest(mac, record_mac(secret, topic, key, value)):
        raise RecordError("bad_signature", f"{what}: its {MAC_HEADER} header is not valid (not the agent's)")
