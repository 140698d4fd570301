"""The in-memory model every assignor works on.

Instances are immutable and validated (see :mod:`rackplan.assignor.parse`), so the
algorithms never re-check input.  Racks are opaque strings; for hot loops the
cluster also exposes them as small integers and each partition's replica racks
as a bit mask (bit ``i`` set when rack ``racks[i]`` holds a replica), so
"is this partition local to that member" is one shift and one AND.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from .record import field, record

TopicPartition = tuple[str, int]

#: Kafka's ``DEFAULT_GENERATION``: a member that reports no generation.
NO_GENERATION = -1


@record(frozen=True)
class Cluster:
    """Brokers with their racks and topics with their replica lists.

    ``racks`` lists every broker rack, sorted; ``rack_bit[r]`` is the index of
    rack ``r`` there.  ``masks[t][p]`` is the replica-rack mask of partition
    ``p`` of topic ``t``: the racks of all its replicas, offline or not.
    Rack-less brokers contribute nothing to a mask (their rack is unknown).
    """

    broker_racks: Mapping[int, str | None]
    topics: Mapping[str, tuple[tuple[int, ...], ...]]
    #: ``cluster.traffic``: bytes/s per partition of the topics it lists (one float each); None
    #: when the instance has none, so every traffic figure and rule stays off (the contract).
    traffic: Mapping[str, tuple[float, ...]] | None = None
    racks: tuple[str, ...] = field(init=False)
    rack_bit: Mapping[str, int] = field(init=False)
    masks: Mapping[str, tuple[int, ...]] = field(init=False)

    def __post_init__(self) -> None:
        racks = tuple(sorted({r for r in self.broker_racks.values() if r is not None}))
        rack_bit = {r: i for i, r in enumerate(racks)}
        broker_bit = {b: (1 << rack_bit[r]) if r is not None else 0 for b, r in self.broker_racks.items()}
        masks: dict[str, tuple[int, ...]] = {}
        for topic, parts in self.topics.items():
            # Replica lists repeat (a few brokers, millions of partitions): one mask per distinct list.
            memo: dict[tuple[int, ...], int] = {}
            for replicas in set(parts):
                m = 0
                for b in replicas:
                    m |= broker_bit[b]
                memo[replicas] = m
            masks[topic] = tuple(map(memo.__getitem__, parts))
        object.__setattr__(self, "racks", racks)
        object.__setattr__(self, "rack_bit", rack_bit)
        object.__setattr__(self, "masks", masks)

    def restrict(self, topics: Iterable[str]) -> Cluster:
        """The same cluster with only ``topics`` (those it has, sorted): masks reused, never recomputed.

        Equal to building the cluster from the same brokers and those topics,
        at the cost of two dictionary lookups per topic; the agent builds its
        snapshot's cluster once and restricts it per group.
        """
        names = sorted(t for t in set(topics) if t in self.topics)
        out = object.__new__(Cluster)
        object.__setattr__(out, "broker_racks", self.broker_racks)
        object.__setattr__(out, "topics", {t: self.topics[t] for t in names})
        traffic = self.traffic
        object.__setattr__(
            out, "traffic", None if traffic is None else {t: traffic[t] for t in names if t in traffic}
        )
        object.__setattr__(out, "racks", self.racks)
        object.__setattr__(out, "rack_bit", self.rack_bit)
        object.__setattr__(out, "masks", {t: self.masks[t] for t in names})
        return out

    def extend(self, topics: Mapping[str, tuple[tuple[int, ...], ...]]) -> Cluster:
        """This cluster with ``topics`` added (same brokers): only the new topics' masks are computed."""
        added = Cluster(self.broker_racks, {t: parts for t, parts in topics.items() if t not in self.topics})
        out = object.__new__(Cluster)
        object.__setattr__(out, "broker_racks", self.broker_racks)
        object.__setattr__(out, "topics", {**self.topics, **added.topics})
        object.__setattr__(out, "traffic", self.traffic)
        object.__setattr__(out, "racks", self.racks)
        object.__setattr__(out, "rack_bit", self.rack_bit)
        object.__setattr__(out, "masks", {**self.masks, **added.masks})
        return out

    def with_traffic(self, traffic: Mapping[str, tuple[float, ...]] | None) -> Cluster:
        """The same cluster with ``cluster.traffic`` replaced (the agent's measured bytes/s): masks reused."""
        out = self.restrict(self.topics)
        object.__setattr__(out, "traffic", traffic)
        return out

    def partition_count(self, topic: str) -> int:
        return len(self.topics[topic])

    def replica_racks(self, topic: str, partition: int) -> frozenset[str]:
        """The set of racks holding a replica of ``topic-partition``."""
        m = self.masks[topic][partition]
        return frozenset(r for i, r in enumerate(self.racks) if m >> i & 1)

    def member_bit(self, rack: str | None) -> int:
        """The mask bit of a client rack; 0 when the rack is absent or holds no broker.

        A member in a rack with no broker can be local to nothing, which a
        zero bit expresses without special cases.
        """
        if rack is None:
            return 0
        i = self.rack_bit.get(rack)
        return 0 if i is None else 1 << i


def is_cross_rack(member_rack: str | None, member_bit: int, mask: int) -> bool:
    """The contract's definition: the member has a rack and no replica is in it.

    A partition whose replicas all sit on rack-less brokers has no known rack
    and is not counted as cross-rack.
    """
    return member_rack is not None and mask != 0 and not (mask & member_bit)


@record(frozen=True)
class Member:
    """One consumer of a group, as its JoinGroup subscription describes it."""

    member_id: str
    rack: str | None
    topics: tuple[str, ...]
    owned: tuple[TopicPartition, ...] = ()
    generation: int = NO_GENERATION
    group_instance_id: str | None = None


CONSUMER_ASSIGNORS = ("range", "cooperative-sticky", "rack-optimal")
DEFAULT_CONSUMER_ASSIGNOR = "cooperative-sticky"


OBJECTIVES = ("partitions", "bytes")
BALANCES = ("count", "bytes")


@record(frozen=True)
class ConsumerGroup:
    """A group as the contract gives it; ``objective``/``balance`` other than the defaults need rack-optimal.

    ``balance_floor`` is the contract's bytes/s added to every partition's
    weight under ``balance: bytes``; None means its default (1% of the mean).
    """

    group_id: str
    assignor: str
    members: tuple[Member, ...]
    objective: str = "partitions"
    balance: str = "count"
    balance_floor: float | None = None


@record(frozen=True)
class ConsumerPlan:
    """An assignor's answer: partitions per member, and what cooperative rebalancing withholds.

    ``revoked[m]`` lists partitions ``m`` owned that move to another member:
    they are in nobody's ``assignment`` this round.  ``stats`` holds an
    assignor's own additive fields of the contract's ``stats`` (rack-optimal:
    whether the plan is proven optimal).
    """

    assignment: Mapping[str, Sequence[TopicPartition]]
    revoked: Mapping[str, Sequence[TopicPartition]] = field(default_factory=dict)
    stats: Mapping[str, bool | int | float] = field(default_factory=dict)


# ---- Kafka Streams --------------------------------------------------------

STREAMS_ASSIGNORS = ("high-availability", "sticky")
RACK_STRATEGIES = ("none", "min_traffic", "balance_subtopology")


@record(frozen=True)
class Subtopology:
    id: str
    source_topics: tuple[str, ...]
    changelog_topics: tuple[str, ...]
    stateful: bool


@record(frozen=True)
class StreamsClient:
    process_id: str
    rack: str | None
    threads: int
    tags: Mapping[str, str]
    previous_active: tuple[str, ...] = ()
    previous_standby: tuple[str, ...] = ()
    task_lags: Mapping[str, int] = field(default_factory=dict)


#: Kafka's default ``(traffic_cost, non_overlap_cost)`` for stateful tasks, by Streams assignor
#: (``HighAvailabilityTaskAssignor`` favours fewer moves, ``StickyTaskAssignor`` locality).
STATEFUL_COSTS: Mapping[str, tuple[int, int]] = {"high-availability": (10, 1), "sticky": (1, 10)}
#: The costs both use for stateless tasks: moving one costs nothing.
STATELESS_COSTS = (1, 0)


@record(frozen=True)
class RackAwareConfig:
    """``rack.aware.assignment.*``: None for a cost means Kafka's default for the assignor."""

    strategy: str = "none"
    traffic_cost: int | None = None
    non_overlap_cost: int | None = None
    sticky_to_previous: bool = False
    #: weigh each crossing by its partition's bytes/s (``cluster.traffic``) times ``traffic_cost``
    weigh_by_traffic: bool = False

    def costs(self, assignor: str) -> tuple[int, int]:
        """``(traffic_cost, non_overlap_cost)`` for stateful tasks: the configured ones, else Kafka's defaults."""
        traffic, non_overlap = STATEFUL_COSTS[assignor]
        return (
            traffic if self.traffic_cost is None else self.traffic_cost,
            non_overlap if self.non_overlap_cost is None else self.non_overlap_cost,
        )


@record(frozen=True)
class StreamsApp:
    application_id: str
    subtopologies: tuple[Subtopology, ...]
    clients: tuple[StreamsClient, ...]
    num_standby_replicas: int = 0
    acceptable_recovery_lag: int = 10_000
    max_warmup_replicas: int = 2
    rack_aware_assignment_tags: tuple[str, ...] = ()
    rack_aware: RackAwareConfig = field(default_factory=RackAwareConfig)
    assignor: str = "high-availability"
    #: partitions per sub-topology (its source topics all have this many)
    partitions: Mapping[str, int] = field(default_factory=dict)


def task_id(subtopology: str, partition: int) -> str:
    return f"{subtopology}_{partition}"


#: Sort key of one id component: numbers (ASCII digits, maybe after a minus) first, in numeric order, then
#: other strings.
IdKey = tuple[int, int, str, str]


def id_key(s: str) -> IdKey:
    """Numeric order for ASCII-digit ids, without ``int()``, then string order for the rest.

    ``str.isdigit`` alone is not enough: ``"²"`` is a digit ``int`` rejects,
    and a 5,000-digit id exceeds ``int``'s conversion limit.  Comparing the
    digits without leading zeros by length, then as strings, is the numeric
    order for any length; the raw string breaks the tie between ``"01"`` and
    ``"1"`` so the order is total and the output deterministic.
    """
    if s.isascii() and s.isdigit():
        d = s.lstrip("0")
        return (0, len(d), d, s)
    if s[:1] == "-" and s[1:].isascii() and s[1:].isdigit():
        # A negative number (a JSON integer id may be one): before every other number, the larger
        # magnitude first, so by minus its length, then by its digits' nines' complement.
        d = s[1:].lstrip("0")
        return (-1, -len(d), d.translate(_NINES), s)
    return (1, 0, s, s)


_NINES = str.maketrans("0123456789", "9876543210")


def task_key(task: str) -> tuple[IdKey, IdKey]:
    """Sort key of a task id: sub-topology, then partition, numerically where ids are numbers."""
    sub, _, part = task.rpartition("_")
    return (id_key(sub), id_key(part))


def sorted_tasks(tasks: Sequence[str]) -> list[str]:
    """Tasks in the contract's order."""
    return sorted(tasks, key=task_key)
