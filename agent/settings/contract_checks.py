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
from rackplan.assignor.fields import InputError
from rackplan.assignor.model import Cluster
from rackplan.assignor.parse import parse_consumer_group, parse_streams_app

from .wording import did_you_mean


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


#: keys of a ``streams_apps`` entry: the contract's, plus ``fetch_mode`` and ``group_protocol`` (``streams``:
#: a KIP-1071 group the broker assigns, which librdkafka cannot describe; ``classic``, the default: KIP-924)
STREAMS_APP_KEYS = CONTRACT_STREAMS_APP_KEYS | {"fetch_mode", "group_protocol"}


CLIENT_KEYS = STREAMS_CLIENT_KEYS


def streams_keys_problems(entry: Mapping[str, Any], where: str) -> list[str]:
    """A settings file's ``streams_apps`` entry is as strict as a consumer group: every typo is named."""
    out = unknown_key_problems(entry, STREAMS_APP_KEYS, where)
    for part, allowed in (("subtopologies", SUBTOPOLOGY_KEYS), ("clients", CLIENT_KEYS)):
        items = entry.get(part)
        for i, item in enumerate(items if isinstance(items, list) else []):
            if isinstance(item, dict):
                out += unknown_key_problems(item, allowed, f"{where}.{part}[{i}]")
    if isinstance(entry.get("rack_aware"), dict):
        out += unknown_key_problems(entry["rack_aware"], RACK_AWARE_KEYS, f"{where}.rack_aware")
    return out


def check_streams_keys(entry: Mapping[str, Any], where: str) -> None:
    """:func:`streams_keys_problems` as one ``ValueError`` (``; `` between them)."""
    _raise(streams_keys_problems(entry, where))


def unknown_key_problems(entry: Mapping[str, Any], allowed: frozenset[str], where: str) -> list[str]:
    """A settings file is strict where the contract is lenient: a typo (``rak: az-b``) must not
    silently make a member rack-less and its group's cross-rack figure look perfect. One line per
    unknown key, with the closest allowed key as a suggestion (else the allowed keys)."""
    out = []
    for key in entry:
        if key not in allowed:
            hint = did_you_mean(key, allowed) or f"; expected one of {', '.join(sorted(allowed))}"
            out.append(f"{where}.{key}: unknown key{hint}")
    return out


def _raise(problems: list[str]) -> None:
    if problems:
        raise ValueError("; ".join(problems))


def consumer_group_problems(entry: Any, where: str) -> list[str]:
    """Every unknown key of a registration, and the first problem the contract parser finds (it stops
    there), and the settings' own keys (topic existence aside): one line each."""
    if not isinstance(entry, dict):
        return [f"{where}: expected an object"]
    out = unknown_key_problems(entry, GROUP_KEYS, where)
    members = entry.get("members")
    for i, member in enumerate(members if isinstance(members, list) else []):
        if isinstance(member, dict):
            out += unknown_key_problems(member, MEMBER_KEYS, f"{where}.members[{i}]")
    try:
        parse_consumer_group(entry, _placeholder_cluster(_topics_of(entry, "consumer_group")))
    except InputError as e:
        out.append(str(_reraise(e, where, "consumer_group")))
    out += _fetch_mode_problems(entry, where)
    topics = entry.get("topics")
    if topics is not None and (
        not isinstance(topics, list) or not all(isinstance(t, str) and t for t in topics)
    ):
        out.append(f"{where}.topics: expected an array of topic names")
    return out


def check_consumer_group(entry: Any, where: str) -> None:
    """Reject a registration the contract parser would reject (topic existence aside), and unknown keys."""
    _raise(consumer_group_problems(entry, where))


def _fetch_mode_problems(entry: Mapping[str, Any], where: str) -> list[str]:
    mode = entry.get("fetch_mode")
    if mode is not None and mode not in ("nearest-replica", "leader"):
        return [f"{where}.fetch_mode: expected nearest-replica or leader, got {mode!r}"]
    return []


def streams_app_problems(entry: Any, where: str) -> list[str]:
    """The contract parser's first problem with a ``streams_apps`` entry, and its ``fetch_mode``'s."""
    if not isinstance(entry, dict):
        return [f"{where}: expected an object"]
    out = []
    try:
        parse_streams_app(entry, _placeholder_cluster(_topics_of(entry, "streams_app")))
    except InputError as e:
        out.append(str(_reraise(e, where, "streams_app")))
    protocol = entry.get("group_protocol")
    if protocol is not None and protocol not in ("classic", "streams"):
        out.append(f"{where}.group_protocol: expected classic or streams, got {protocol!r}")
    return out + _fetch_mode_problems(entry, where)


def check_streams_app(entry: Any, where: str) -> None:
    _raise(streams_app_problems(entry, where))


def checked_registrations(entries: tuple[dict[str, Any], ...], field: str) -> tuple[dict[str, Any], ...]:
    """A settings file's ``consumer_groups`` or ``streams_apps``, checked entry by entry: every problem
    of every entry and every duplicate, one line each, in one ``ValueError`` (lines apart, which
    :func:`~.errors.describe_errors` prints one by one)."""
    id_key, noun = ("group_id", "group") if field == "consumer_groups" else ("application_id", "app")
    out: list[str] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        where = f"{field}[{i}]"
        if field == "consumer_groups":
            found = consumer_group_problems(entry, where)
        else:
            found = streams_app_problems(entry, where) + streams_keys_problems(entry, where)
        if not found and entry[id_key] == "":  # the contract's parser takes it; a plan key needs a name
            found = [f"{where}.{id_key}: empty: a plan's key is {field.split('_')[0]}/<{id_key}>"]
        out += found
        if not found and entry[id_key] in seen:
            out.append(f"{where}.{id_key}: duplicate {noun} {entry[id_key]!r}")
        elif not found:
            seen.add(entry[id_key])
    if out:
        raise ValueError("\n".join(out))
    return entries
