"""Every group the agent would plan now, read once: the settings file and the registrations topic merged.

For readers outside the agent's loop (``rackplan snapshot``, ``rackplan plans``): the loop keeps
its registrations up to date record by record (:mod:`rackplan.agent.cycle.intake`, metrics and
logs included); these read the topic to its end once and apply the same rules: the bounded,
signature-checked decoder, the settings file's precedence (:func:`.registry.settings_group_refusal`),
the TTL, then :func:`.registry.merge_registrations`.  A record the agent would skip is skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..kafka.tail import RawRecord, read_to_end
from ..protocol.registrations import RegistrationRecordError
from ..settings.sections import Settings
from .membership import RealGroup
from .registry import (
    MergeResult,
    RegistrationStore,
    decode_registration,
    merge_registrations,
    settings_group_refusal,
)


def merged_registrations(
    settings: Settings,
    raw: Iterable[RawRecord],
    now_ms: int,
    discovered: Mapping[str, RealGroup] | None = None,
) -> MergeResult:
    """The registrations ``raw`` (the registrations topic, oldest first) and the settings file define at
    ``now_ms``, merged as the agent merges them; ``discovered``: live groups for members nobody registered."""
    s = settings.registrations
    secret = s.secret()
    store = RegistrationStore(s.ttl_s, s.max_clock_skew_s)
    skew_ms = int(s.max_clock_skew_s * 1000)
    for r in raw:
        try:
            entry = decode_registration(r.key, r.value, r.timestamp_ms, secret=secret, max_skew_ms=skew_ms)
        except RegistrationRecordError:
            continue  # the agent skips it too, and counts and logs why
        if entry is not None and settings_group_refusal(settings, entry) is not None:
            continue
        store.apply((r.key or b"").decode("utf-8", "replace"), entry, now_ms)
    store.expire(now_ms)
    return merge_registrations(settings, store.entries(), discovered)


def read_registrations(
    settings: Settings,
    config: Mapping[str, Any],
    now_ms: int,
    discovered: Mapping[str, RealGroup] | None = None,
) -> MergeResult:
    """:func:`merged_registrations` of the registrations topic read to its end now
    (:class:`~..kafka.exceptions.TopicReadError` when it cannot be)."""
    raw = read_to_end(config, settings.registrations_topic, settings.io_timeout_s, "registrations topic")
    return merged_registrations(settings, raw, now_ms, discovered)
