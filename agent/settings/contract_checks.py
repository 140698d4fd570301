"""Registrations checked as the contract's parser checks them, and stricter: unknown keys are named.

A ``consumer_groups`` / ``streams_apps`` entry of the settings file, and a registration record
(:mod:`rackplan.agent.groups.registry`), must be what ``rackplan assign`` would accept (topic
existence aside: no metadata is known yet), with no key the contract does not know.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rackplan.assignor.contract import (
    CONSUMER_GROUP_KEYS,
    CONSUMER_MEMBER_KEYS,
    RACK_AWARE_KEYS,
    STREAMS_CLIENT_KEYS,
    SUBTOPOLOGY_KEYS,
    app_topics,
    group_topics,
)
from rackplan.assignor.contract import STREAMS_APP_KEYS as CONTRACT_STREAMS_APP_KEYS
from rackplan.assignor.model import Cluster
from rackplan.assignor.parse import InputError, parse_consumer_group, parse_streams_app


def _topics_of(entry: Mapping[str, Any], kind: str) -> set[str]:
    """The topics an entry names (:mod:`rackplan.assignor.contract`), plus a group's own ``topics`` list."""
    if kind != "consumer_group":
        return set(app_topics(entry))
    out = set(group_topics(entry))
    if isinstance(entry.get("topics"), list):
        out.update(t for t in entry["topics"] if isinstance(t, str))
    return out


def _placeholder_cluster(topics: set[str]) -> Cluster:
    # Registrations are checked before any metadata is known: every named topic
    # exists with no partitions, so the contract parser checks everything else.
    return Cluster(broker_racks={}, topics={t: () for t in sorted(topics)})


def _reraise(e: InputError, where: str, kind: str) -> ValueError:
    field = e.field.removeprefix(kind)
    return ValueError(f"{where}{field}: {e.message}")


#: keys of a ``consumer_groups`` entry: the contract's, plus what the settings add
GROUP_KEYS = CONSUMER_GROUP_KEYS | {"topics", "fetch_mode"}


#: keys of a member of a ``consumer_groups`` entry (the contract's)
MEMBER_KEYS = CONSUMER_MEMBER_KEYS


#: keys of a ``streams_apps`` entry: the contract's, plus ``fetch_mode``
STREAMS_APP_KEYS = CONTRACT_STREAMS_APP_KEYS | {"fetch_mode"}


CLIENT_KEYS = STREAMS_CLIENT_KEYS


def check_streams_keys(entry: Mapping[str, Any], where: str) -> None:
    """A settings file's ``streams_apps`` entry is as strict as a consumer group: a typo is named."""
    _no_unknown_keys(entry, STREAMS_APP_KEYS, where)
    for part, allowed in (("subtopologies", SUBTOPOLOGY_KEYS), ("clients", CLIENT_KEYS)):
        for i, item in enumerate(entry.get(part) or []):
            if isinstance(item, dict):
                _no_unknown_keys(item, allowed, f"{where}.{part}[{i}]")
    if isinstance(entry.get("rack_aware"), dict):
        _no_unknown_keys(entry["rack_aware"], RACK_AWARE_KEYS, f"{where}.rack_aware")


def _no_unknown_keys(entry: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    """A settings file is strict where the contract is lenient: a typo (``rak: az-b``) must not
    silently make a member rack-less and its group's cross-rack figure look perfect."""
    for key in entry:
        if key not in allowed:
            raise ValueError(f"{where}.{key}: unknown key; expected one of {', '.join(sorted(allowed))}")


def check_consumer_group(entry: Any, where: str) -> None:
    """Reject a registration the contract parser would reject (topic existence aside), and unknown keys."""
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected an object")
    _no_unknown_keys(entry, GROUP_KEYS, where)
    for i, member in enumerate(entry.get("members") or []):
        if isinstance(member, dict):
            _no_unknown_keys(member, MEMBER_KEYS, f"{where}.members[{i}]")
    try:
        parse_consumer_group(entry, _placeholder_cluster(_topics_of(entry, "consumer_group")))
    except InputError as e:
        raise _reraise(e, where, "consumer_group") from None
    _check_fetch_mode(entry, where)
    topics = entry.get("topics")
    if topics is not None and (
        not isinstance(topics, list) or not all(isinstance(t, str) and t for t in topics)
    ):
        raise ValueError(f"{where}.topics: expected an array of topic names")


def _check_fetch_mode(entry: Mapping[str, Any], where: str) -> None:
    mode = entry.get("fetch_mode")
    if mode is not None and mode not in ("nearest-replica", "leader"):
        raise ValueError(f"{where}.fetch_mode: expected nearest-replica or leader, got {mode!r}")


def check_streams_app(entry: Any, where: str) -> None:
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected an object")
    try:
        parse_streams_app(entry, _placeholder_cluster(_topics_of(entry, "streams_app")))
    except InputError as e:
        raise _reraise(e, where, "streams_app") from None
    _check_fetch_mode(entry, where)
