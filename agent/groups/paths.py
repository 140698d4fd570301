"""Which path assigns a group's partitions: the agent's plans (classic groups, followers) or the broker.

KIP-848 consumer groups (``group.protocol=consumer``) and KIP-1071 Streams groups
(``group.protocol=streams``) are assigned by the group coordinator; their members
ignore follower plans, so the agent publishes none for them (it would only
mislead) and judges the coordinator's live assignment against the plan it would
have made instead (:mod:`rackplan.agent.cycle.broker_groups`).  The exception is
a KIP-848 group on the broker assignor ``rackplan`` (``RackplanServerAssignor``),
which reads the plan topic and applies a plan that fits: it is fed plans.

- A consumer group is classified from its description (DescribeConsumerGroups,
  confluent-kafka 2.16: ``type`` CONSUMER or CLASSIC, ``partition_assignor``):
  type CONSUMER -> ``kip848-broker``, with the broker assignor's name; otherwise
  ``classic-followers``, with the protocol the members agreed on.  A group with
  no live member (a follower group reads by ``assign()``, so it shows none) is
  ``classic-followers`` when plan followers are registered, else ``unknown``.
- A Streams app cannot be described here: librdkafka 2.16 has no
  DescribeStreamsGroups and its group types stop at CONSUMER and CLASSIC.  Its
  path is what its ``streams_apps`` settings entry says: ``group_protocol:
  streams`` -> ``streams-broker``, else ``classic-followers`` (KIP-924, the plans).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..protocol.plans import CONSUMER
from .membership import RealGroup

CLASSIC_FOLLOWERS = "classic-followers"
KIP848_BROKER = "kip848-broker"
STREAMS_BROKER = "streams-broker"
UNKNOWN = "unknown"
#: the paths on which the broker assigns
BROKER_PATHS = frozenset({KIP848_BROKER, STREAMS_BROKER})
#: the one broker-side assignor that reads the agent's plans (``RackplanServerAssignor.name()``): a KIP-848
#: group on it still gets plans (the plugin applies one when it fits, docs/java.md)
PLAN_READER = "rackplan"


@dataclass(frozen=True, slots=True)
class GroupPath:
    """A group's path and the assignor on it (None: nobody says)."""

    path: str
    assignor: str | None = None

    @property
    def on_broker(self) -> bool:
        return self.path in BROKER_PATHS

    @property
    def takes_plans(self) -> bool:
        """Someone reads the agent's plans for the group: followers, or the broker's ``rackplan`` assignor."""
        return not self.on_broker or (self.path == KIP848_BROKER and self.assignor == PLAN_READER)

    def as_json(self) -> dict[str, Any]:
        return {"path": self.path, "assignor": self.assignor}


def classify(kind: str, real: RealGroup | None, *, followers: bool, group_protocol: str | None) -> GroupPath:
    """The path of a group of ``kind`` (``consumer`` or ``streams``).

    ``real``: its description this cycle (None: not described); ``followers``:
    plan followers are registered for it; ``group_protocol``: a Streams app's
    ``group_protocol`` setting.
    """
    if kind != CONSUMER:
        if group_protocol == "streams":
            return GroupPath(STREAMS_BROKER)
        return GroupPath(CLASSIC_FOLLOWERS)
    if real is not None and real.members:
        if real.type == "CONSUMER":
            return GroupPath(KIP848_BROKER, real.assignor or None)
        return GroupPath(CLASSIC_FOLLOWERS, real.assignor or None)
    return GroupPath(CLASSIC_FOLLOWERS) if followers else GroupPath(UNKNOWN)


def broker_streams_apps(streams_apps: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Application ids of the Streams apps the settings put on KIP-1071 (``group_protocol: streams``): not
    described (librdkafka has no StreamsGroupDescribe), their live assignment unseen."""
    return frozenset(str(a["application_id"]) for a in streams_apps if a.get("group_protocol") == "streams")


def publishes(current: GroupPath, last_known: GroupPath | None) -> bool:
    """Whether the agent publishes plans for a group on ``current`` (``last_known``: its last path other
    than ``unknown``): a KIP-848 group that empties for a while stays the broker's until it is seen again."""
    seen = current if current.path != UNKNOWN or last_known is None else last_known
    return seen.takes_plans
