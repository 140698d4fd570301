"""The contract's vocabulary, in one place, for every caller above the assignors.

What the agent (:mod:`rackplan.agent.planning.planner`), the fleet job
(:mod:`rackplan.fleet.units`) and the tests ask of a consumer group or a
Streams app, answered once so they cannot drift apart:

- :func:`group_topics`, :func:`app_topics`, :func:`topics_of`: the topics a plan
  of a spec reads (a group's members' topics; an app's source *and* changelog
  topics);
- :func:`subtopologies_of`, :func:`task_partitions`: the topic partitions a
  Streams task reads or writes;
- :func:`is_cross_rack`, :func:`leader_cross_rack`: the locality judgement, in
  the contract's nearest-replica sense and in leader-only fetching;
- :func:`follow_up`, :func:`settle_cooperative`: Kafka's follow-up rebalance
  after a cooperative round, as a loop with an explicit limit;
- :func:`cluster_document`, :func:`instance_document`: a model back into the
  contract's input document.

Pure, like the rest of :mod:`rackplan.assignor`: documents in, values out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Sized

from .model import (
    Cluster,
    ConsumerGroup,
    ConsumerPlan,
    StreamsApp,
    Subtopology,
    TopicPartition,
    is_cross_rack,
)
from .record import record, replace

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (issue 29)

if TYPE_CHECKING:
    from typing import Any

# The keys each object of the contract's input has (docs/CONTRACT.md), kept beside the rest of the
# contract's vocabulary: layers that refuse unknown keys (the agent's settings and registrations) import these sets and
# add their own, so a key the contract gains is accepted everywhere at once (they drifted before:
# the agent refused ``objective``, ``balance``, ``balance_floor`` and ``weigh_by_traffic``).
CONSUMER_GROUP_KEYS = frozenset({"group_id", "assignor", "members", "objective", "balance", "balance_floor"})
CONSUMER_MEMBER_KEYS = frozenset({"member_id", "rack", "topics", "owned", "generation", "group_instance_id"})
STREAMS_APP_KEYS = frozenset(
    {
        "application_id",
        "subtopologies",
        "clients",
        "num_standby_replicas",
        "acceptable_recovery_lag",
        "max_warmup_replicas",
        "rack_aware_assignment_tags",
        "rack_aware",
        "assignor",
    }
)
SUBTOPOLOGY_KEYS = frozenset({"id", "source_topics", "changelog_topics", "stateful"})
STREAMS_CLIENT_KEYS = frozenset(
    {"process_id", "rack", "threads", "tags", "previous_active", "previous_standby", "task_lags"}
)
RACK_AWARE_KEYS = frozenset(
    {"strategy", "traffic_cost", "non_overlap_cost", "sticky_to_previous", "weigh_by_traffic"}
)


__all__ = [
    "CONSUMER_GROUP_KEYS",
    "CONSUMER_MEMBER_KEYS",
    "FOLLOW_UP_LIMIT",
    "RACK_AWARE_KEYS",
    "STREAMS_APP_KEYS",
    "STREAMS_CLIENT_KEYS",
    "SUBTOPOLOGY_KEYS",
    "app_topics",
    "cluster_document",
    "follow_up",
    "group_topics",
    "instance_document",
    "is_cross_rack",
    "leader_cross_rack",
    "settle_cooperative",
    "subtopologies_of",
    "task_partitions",
    "topics_of",
]


# ---- the topics of a spec --------------------------------------------------------


def _strings(v: object) -> list[str]:
    return [t for t in v if isinstance(t, str)] if isinstance(v, list | tuple) else []


def group_topics(spec: Mapping[str, Any]) -> frozenset[str]:
    """The topics a ``consumer_group`` document's members read.

    Lenient (registrations are read before and after validation): what is
    not a list of strings adds nothing.
    """
    return frozenset(
        t for m in spec.get("members") or [] if isinstance(m, Mapping) for t in _strings(m.get("topics"))
    )


def app_topics(spec: Mapping[str, Any]) -> frozenset[str]:
    """The topics a ``streams_app`` document's tasks read or write: every source and changelog topic."""
    return frozenset(
        t
        for s in spec.get("subtopologies") or []
        if isinstance(s, Mapping)
        for key in ("source_topics", "changelog_topics")
        for t in _strings(s.get(key))
    )


def topics_of(spec: ConsumerGroup | StreamsApp) -> frozenset[str]:
    """:func:`group_topics` / :func:`app_topics` of a parsed spec."""
    if isinstance(spec, ConsumerGroup):
        return frozenset(t for m in spec.members for t in m.topics)
    return frozenset(t for s in spec.subtopologies for t in (*s.source_topics, *s.changelog_topics))


# ---- tasks -> partitions ---------------------------------------------------------


def subtopologies_of(spec: Mapping[str, Any] | StreamsApp) -> dict[str, Subtopology]:
    """Sub-topologies by id, of a parsed app or leniently of a (validated) ``streams_app`` document.

    A document's ``stateful`` defaults as the contract says: true when the
    sub-topology has changelog topics.
    """
    if isinstance(spec, StreamsApp):
        return {s.id: s for s in spec.subtopologies}
    out: dict[str, Subtopology] = {}
    for s in spec.get("subtopologies") or []:
        if isinstance(s, Mapping):
            changelogs = tuple(_strings(s.get("changelog_topics")))
            stateful = bool(s.get("stateful", bool(changelogs)))
            out[str(s.get("id"))] = Subtopology(
                str(s.get("id")), tuple(_strings(s.get("source_topics"))), changelogs, stateful
            )
    return out


def task_partitions(
    subtopologies: Mapping[str, Subtopology],
    topics: Mapping[str, Sized],
    task: str,
    standby: bool = False,
) -> list[TopicPartition]:
    """The topic partitions task ``<sub-topology>_<partition>`` reads or writes, existing ones only.

    An active task reads its source topics' partition and, when stateful,
    writes its changelogs'; a standby only follows the changelogs.  Topics not
    in ``topics`` (a cluster's), partitions past a topic's end, an unknown
    sub-topology or a partition that is not a decimal number give nothing.
    """
    sub, _, part = task.rpartition("_")
    s = subtopologies.get(sub)
    if s is None or not (part.isascii() and part.isdigit()) or len(part) > 18:
        return []
    p = int(part)
    names = [] if standby else list(s.source_topics)
    if s.stateful:
        names += s.changelog_topics
    return [(t, p) for t in names if t in topics and p < len(topics[t])]


# ---- locality ----------------------------------------------------------------------


def leader_cross_rack(member_rack: str | None, leader_rack: str | None) -> bool:
    """Leader-only fetching: cross-rack when both racks are known and differ.

    A partition without leader, or a leader on a rack-less broker, has no known
    rack and is not counted, as :func:`is_cross_rack` does for unknown replica racks.
    """
    return member_rack is not None and leader_rack is not None and leader_rack != member_rack


# ---- cooperative follow-up rounds --------------------------------------------------


def follow_up(
    group: ConsumerGroup, assignment: Mapping[str, Sequence[TopicPartition]], generation: int
) -> ConsumerGroup:
    """The group of the rebalance after a cooperative round: each member owns what it was assigned.

    Withheld (revoked) partitions are owned by nobody; every member reports
    ``generation``, so every claim is believed.
    """
    return replace(
        group,
        members=tuple(
            replace(m, owned=tuple(assignment.get(m.member_id, ())), generation=generation)
            for m in group.members
        ),
    )


#: Follow-up rounds callers allow after a cooperative round (the agent and the fleet job alike).
#: Kafka's cooperative assignors, and rackplan's, need one (``tests/assignor/test_contract.py`` checks
#: rackplan's); the sticky assignor's own cap on the rounds it *simulates* inside one run is
#: another bound, :data:`rackplan.assignor.consumer.sticky.MAX_FOLLOW_UPS`.
FOLLOW_UP_LIMIT = 3

#: One round of a consumer assignor: the plan of a group, and its elapsed milliseconds.
Round = Callable[[ConsumerGroup], tuple[ConsumerPlan, float]]


@record(frozen=True)
class Settled:
    """Where :func:`settle_cooperative` stopped: the last round's group and plan, and how many follow-ups ran.

    ``settled`` is False when the limit stopped it with partitions still withheld.
    """

    group: ConsumerGroup
    plan: ConsumerPlan
    elapsed_ms: float
    follow_ups: int

    @property
    def settled(self) -> bool:
        return not any(self.plan.revoked.values())


def settle_cooperative(
    group: ConsumerGroup,
    plan: ConsumerPlan,
    elapsed_ms: float,
    run: Round,
    limit: int,
    generation: Callable[[ConsumerGroup], int],
) -> Settled:
    """Kafka's follow-up rebalances after ``plan``: while it withholds partitions, at most ``limit`` times,
    every member owns what the last round gave it (at ``generation(group)``) and ``run`` assigns again.

    Callers choose the limit and what an unsettled end means: the agent
    publishes with nothing withheld, the fleet job reports an error.  Kafka's
    own cooperative assignors settle in one follow-up.
    """
    rounds = 0
    while any(plan.revoked.values()) and rounds < limit:
        group = follow_up(group, plan.assignment, generation(group))
        plan, elapsed_ms = run(group)
        rounds += 1
    return Settled(group, plan, elapsed_ms, rounds)


# ---- models back into documents ----------------------------------------------------


def cluster_document(cluster: Cluster) -> dict[str, Any]:
    """The contract's ``cluster`` object of a model (brokers in the model's order)."""
    doc: dict[str, Any] = {
        "brokers": [{"id": b, "rack": r} for b, r in cluster.broker_racks.items()],
        "topics": {t: [list(r) for r in parts] for t, parts in cluster.topics.items()},
    }
    if cluster.traffic is not None:
        doc["traffic"] = {t: list(row) for t, row in cluster.traffic.items()}
    return doc


def instance_document(cluster: Cluster, spec: ConsumerGroup | StreamsApp) -> dict[str, Any]:
    """The contract's input document of a model instance: what ``rackplan assign`` reads back as it.

    The inverse of :func:`rackplan.assignor.parse.parse_instance`, for tests,
    benchmarks and harnesses that hold models and drive the command (or
    Kafka's own assignors) by the contract.
    """
    if isinstance(spec, ConsumerGroup):
        return {"cluster": cluster_document(cluster), "consumer_group": _group_document(spec)}
    return {"cluster": cluster_document(cluster), "streams_app": _app_document(spec)}


def _group_document(group: ConsumerGroup) -> dict[str, Any]:
    members: list[dict[str, Any]] = []
    for m in group.members:
        doc: dict[str, Any] = {
            "member_id": m.member_id,
            "rack": m.rack,
            "topics": list(m.topics),
            "owned": [list(tp) for tp in m.owned],
            "generation": m.generation,
        }
        if m.group_instance_id is not None:
            doc["group_instance_id"] = m.group_instance_id
        members.append(doc)
    doc = {"group_id": group.group_id, "assignor": group.assignor, "members": members}
    # the traffic choices only when made: documents of instances without them stay as they were
    if group.objective != "partitions":
        doc["objective"] = group.objective
    if group.balance != "count":
        doc["balance"] = group.balance
    if group.balance_floor is not None:
        doc["balance_floor"] = group.balance_floor
    return doc


def _app_document(app: StreamsApp) -> dict[str, Any]:
    ra = app.rack_aware
    rack_aware: dict[str, Any] = {"strategy": ra.strategy, "sticky_to_previous": ra.sticky_to_previous}
    if ra.traffic_cost is not None:
        rack_aware["traffic_cost"] = ra.traffic_cost
    if ra.non_overlap_cost is not None:
        rack_aware["non_overlap_cost"] = ra.non_overlap_cost
    if ra.weigh_by_traffic:
        rack_aware["weigh_by_traffic"] = True
    return {
        "application_id": app.application_id,
        "assignor": app.assignor,
        "subtopologies": [
            {
                "id": s.id,
                "source_topics": list(s.source_topics),
                "changelog_topics": list(s.changelog_topics),
                "stateful": s.stateful,
            }
            for s in app.subtopologies
        ],
        "clients": [
            {
                "process_id": c.process_id,
                "rack": c.rack,
                "threads": c.threads,
                "tags": dict(c.tags),
                "previous_active": list(c.previous_active),
                "previous_standby": list(c.previous_standby),
                "task_lags": dict(c.task_lags),
            }
            for c in app.clients
        ],
        "num_standby_replicas": app.num_standby_replicas,
        "acceptable_recovery_lag": app.acceptable_recovery_lag,
        "max_warmup_replicas": app.max_warmup_replicas,
        "rack_aware_assignment_tags": list(app.rack_aware_assignment_tags),
        "rack_aware": rack_aware,
    }
