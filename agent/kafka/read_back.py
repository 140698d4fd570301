"""The plan topic read back: every plan record to its end, malformed and forged ones skipped.

What start-up replays (the generations to continue from) and what the fleet job and the tests read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..core.ports import Logger
from ..protocol.mac import MAC_HEADER, check_mac
from ..protocol.plans import PlanDecodeError, PlanRecord, decode_record
from ..protocol.records import RecordError
from .tail import RawRecord, read_to_end


def read_back(
    config: Mapping[str, Any],
    topic: str,
    timeout_s: float,
    log: Logger,
    skipped: Callable[[str], None] | None = None,
    secret: bytes | None = None,
) -> list[tuple[str, PlanRecord | None]]:
    """Every record of the plan topic, oldest first per partition, up to the current end.

    Malformed records (:func:`rackplan.agent.protocol.records.load_record` bounds them) are
    skipped with a logged reason and ``skipped(reason)``; they never stop the agent.  With a
    ``secret``, so is a record without its valid MAC (:mod:`rackplan.agent.protocol.mac`): a
    forger's plan is never the plan of record, and its generation is not ours to continue.
    """
    raw = read_to_end(config, topic, timeout_s, "plan topic")
    out: list[tuple[str, PlanRecord | None]] = []
    for r in raw:
        try:
            out.append(verified(r, topic, secret))
        except PlanDecodeError as e:
            log.warning("plan record skipped", reason=str(e), partition=r.partition, offset=r.offset)
            if skipped is not None:
                skipped(e.reason)
    return out


def verified(r: RawRecord, topic: str, secret: bytes | None) -> tuple[str, PlanRecord | None]:
    """A plan-topic record as followers take it: its key and plan (None: a tombstone), or
    :class:`PlanDecodeError` (with the reason) for a record without the agent's MAC when ``secret`` is set,
    without a key, or malformed.  The one check every reader of the whole plan topic makes."""
    if r.key is None:
        raise PlanDecodeError("no key", "bad_key")
    try:
        check_mac(secret, topic, r.key, r.value, r.header(MAC_HEADER), "plan record")
    except RecordError as e:
        raise PlanDecodeError(str(e), e.reason) from None
    rec = decode_record(r.key, r.value)
    return r.key.decode("utf-8"), rec
