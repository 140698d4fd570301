"""Subscriptions to topics that do not exist: one member's typo must not stop its whole group's plan.

Kafka's own assignors skip a subscribed topic the metadata does not know (the
member simply gets nothing of it), so a consumer group is planned the same
way: each member's subscription without the topics the snapshot lacks, and
the member and topic named in the plan's reason, the log, the metric
``rackplan_unknown_topic_subscriptions`` and ``/v1/groups``.  When the topic
appears, the change touches the registration's topics and the group is
planned again with it.

Not for Kafka Streams apps: Streams itself refuses to run a topology whose
source topic is missing (MissingSourceTopicException), so an app's plan is
still skipped, naming the topic.  Nor for a group of which no subscribed
topic exists at all: there is nothing to plan.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class MissingTopic:
    """One member's subscription to a topic the cluster does not have."""

    member: str
    topic: str
    #: existing topic names nearest to ``topic``, best first (empty: none is close)
    nearest: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"member": self.member, "topic": self.topic, "nearest_topics": list(self.nearest)}

    def text(self) -> str:
        near = f" (nearest: {', '.join(repr(t) for t in self.nearest)})" if self.nearest else ""
        return (
            f"member {self.member[:200]!r} subscribes to unknown topic {self.topic[:249]!r}, "
            f"left out of this plan{near}"
        )


def missing_topics(spec: Mapping[str, Any], existing: Collection[str]) -> tuple[tuple[str, str], ...]:
    """(member id, topic) of every subscription of a ``consumer_group`` spec to a topic not in ``existing``."""
    out = set()
    for m in spec.get("members") or []:
        for t in m.get("topics") or []:
            if t not in existing:
                out.add((str(m.get("member_id")), str(t)))
    return tuple(sorted(out))


def with_suggestions(
    missing: tuple[tuple[str, str], ...], existing: Collection[str]
) -> tuple[MissingTopic, ...]:
    """:class:`MissingTopic` of each pair, with the nearest existing topic names (difflib, cutoff 0.6)."""
    names = sorted(existing)
    return tuple(
        MissingTopic(mid, t, tuple(difflib.get_close_matches(t, names, n=3, cutoff=0.6)))
        for mid, t in missing
    )


def known_subscriptions(spec: Mapping[str, Any], existing: Collection[str]) -> dict[str, Any]:
    """``spec`` with each member's ``topics`` restricted to ``existing`` (the spec itself is not changed)."""
    members = []
    for m in spec.get("members") or []:
        topics = m.get("topics") or []
        if all(t in existing for t in topics):
            members.append(m)
        else:
            members.append({**m, "topics": [t for t in topics if t in existing]})
    return {**spec, "members": members}
