"""The task model of a Streams app: tasks, clients and what each task costs on each rack.

Tasks and clients become small integers (tasks in the contract's order,
clients sorted by process id, as Kafka sorts its process UUIDs), and clients
are grouped by rack: every cost that depends on locality is the same for all
clients of one rack, which is what lets the rack optimiser aggregate its graph.
"""

from __future__ import annotations

from ..model import (
    Cluster,
    IdKey,
    StreamsApp,
    StreamsClient,
    TopicPartition,
    is_cross_rack,
    task_id,
    task_key,
)
from ..record import record


@record(frozen=True)
class TaskModel:
    """Immutable, index-based view of one app on one cluster.

    ``active_cross[t][g]`` counts the topic partitions of task ``t`` (sources,
    plus changelogs when stateful) with no replica in rack group ``g``;
    ``standby_cross`` counts only its changelog partitions.  Group ``g`` is
    ``group_racks[g]``; a client without a rack is in a group whose counts are
    all zero (the contract never counts its partitions as cross-rack).
    """

    tasks: tuple[str, ...]
    sub_of: tuple[int, ...]
    sub_sizes: tuple[int, ...]
    stateful: tuple[bool, ...]
    clients: tuple[StreamsClient, ...]
    threads: tuple[int, ...]
    group_of: tuple[int, ...]
    group_racks: tuple[str | None, ...]
    active_cross: tuple[tuple[int, ...], ...]
    standby_cross: tuple[tuple[int, ...], ...]
    index: dict[str, int]
    client_index: dict[str, int]
    #: with ``cluster.traffic`` (else empty): like ``active_cross``/``standby_cross``, the known
    #: bytes/s of those crossing partitions (unknown traffic counts 0, as the contract's stats say)
    has_traffic: bool = False
    active_cross_bytes: tuple[tuple[float, ...], ...] = ()
    standby_cross_bytes: tuple[tuple[float, ...], ...] = ()
    #: with ``rack_aware.weigh_by_traffic`` (else empty): per task and rack group the crossing
    #: pairs' bytes/s, unknown ones at the mean of the known, as exact integers (one common scale)
    active_cross_weight: tuple[tuple[int, ...], ...] = ()
    #: ``active_cross_weight`` is bytes/s times ``2**weight_scale`` (0 when not weighed)
    weight_scale: int = 0
    weighed: bool = False

    @property
    def active_cost(self) -> tuple[tuple[int, ...], ...]:
        """What one unit of ``traffic_cost`` buys per task and rack group: crossings, or their bytes/s when weighed."""
        return self.active_cross_weight if self.weighed else self.active_cross

    @property
    def move_unit(self) -> int:
        """The factor ``non_overlap_cost`` takes to stay in the scale of :attr:`active_cost`."""
        return 1 << self.weight_scale

    @property
    def num_tasks(self) -> int:
        return len(self.tasks)

    @property
    def num_clients(self) -> int:
        return len(self.clients)


def build_model(cluster: Cluster, app: StreamsApp) -> TaskModel:
    """Index the app's tasks and clients and precompute their per-rack costs."""
    subs = sorted(app.subtopologies, key=lambda s: task_key(f"{s.id}_0")[0])
    clients = tuple(sorted(app.clients, key=lambda c: c.process_id))
    racks = sorted({c.rack for c in clients if c.rack is not None})
    group_racks: tuple[str | None, ...] = (
        (*racks, None) if any(c.rack is None for c in clients) else tuple(racks)
    )
    gindex = {r: g for g, r in enumerate(group_racks)}
    probes = [(rack, cluster.member_bit(rack)) for rack in group_racks]
    counted: dict[tuple[int, ...], tuple[int, ...]] = {}

    def cross_counts(masks: tuple[int, ...]) -> tuple[int, ...]:
        # Tasks share few distinct mask tuples (racks are few): count each tuple once.
        out = counted.get(masks)
        if out is None:
            out = tuple(sum(1 for m in masks if is_cross_rack(rack, bit, m)) for rack, bit in probes)
            counted[masks] = out
        return out

    entries: list[tuple[tuple[IdKey, int], str, int, bool, tuple[int, ...], tuple[int, ...]]]
    entries = []
    sub_sizes = []
    for j, sub in enumerate(subs):
        n = app.partitions[sub.id]
        sub_sizes.append(n)
        sub_key = task_key(f"{sub.id}_0")[0]
        changelogs = (
            [cluster.masks[t] for t in sub.changelog_topics if t in cluster.masks] if sub.stateful else []
        )
        sources = [cluster.masks[t] for t in sub.source_topics]
        for p in range(n):
            log_masks = tuple(m[p] for m in changelogs if p < len(m))
            all_masks = tuple(m[p] for m in sources) + log_masks
            entries.append(
                (
                    (sub_key, p),
                    task_id(sub.id, p),
                    j,
                    sub.stateful,
                    cross_counts(all_masks),
                    cross_counts(log_masks),
                )
            )
    entries.sort(key=lambda e: e[0])
    active_bytes, standby_bytes, weights, scale = _traffic_figures(
        cluster, app, probes, [e[1] for e in entries]
    )
    return TaskModel(
        tasks=tuple(e[1] for e in entries),
        sub_of=tuple(e[2] for e in entries),
        sub_sizes=tuple(sub_sizes),
        stateful=tuple(e[3] for e in entries),
        clients=clients,
        threads=tuple(c.threads for c in clients),
        group_of=tuple(gindex[c.rack] for c in clients),
        group_racks=group_racks,
        active_cross=tuple(e[4] for e in entries),
        standby_cross=tuple(e[5] for e in entries),
        index={e[1]: i for i, e in enumerate(entries)},
        client_index={c.process_id: i for i, c in enumerate(clients)},
        has_traffic=cluster.traffic is not None,
        active_cross_bytes=active_bytes,
        standby_cross_bytes=standby_bytes,
        active_cross_weight=weights,
        weight_scale=scale,
        weighed=app.rack_aware.weigh_by_traffic,
    )


def _traffic_figures(
    cluster: Cluster, app: StreamsApp, probes: list[tuple[str | None, int]], tasks: list[str]
) -> tuple[tuple[tuple[float, ...], ...], tuple[tuple[float, ...], ...], tuple[tuple[int, ...], ...], int]:
    """Per task and rack group: the bytes/s an active and a standby would read across racks (when the
    cluster has traffic) and the active's crossing weights and their scale (when the app weighs by
    traffic); empty otherwise.  The traffic and contract modules are imported only when one is asked
    for: an instance without traffic does not load them (issue 29: start-up)."""
    if cluster.traffic is None and not app.rack_aware.weigh_by_traffic:
        return (), (), (), 0
    from ..traffic import crossing_bytes, crossing_weights

    pairs = _pairs(cluster, app, tasks)
    active_bytes: tuple[tuple[float, ...], ...] = ()
    standby_bytes: tuple[tuple[float, ...], ...] = ()
    if cluster.traffic is not None:
        active_bytes = crossing_bytes(cluster, probes, [a for a, _ in pairs])
        standby_bytes = crossing_bytes(cluster, probes, [s for _, s in pairs])
    if not app.rack_aware.weigh_by_traffic:
        return active_bytes, standby_bytes, (), 0
    weights, scale = crossing_weights(cluster, probes, [a for a, _ in pairs])
    return active_bytes, standby_bytes, weights, scale


def _pairs(
    cluster: Cluster, app: StreamsApp, tasks: list[str]
) -> list[tuple[list[TopicPartition], list[TopicPartition]]]:
    """Per task, the topic partitions it reads and writes as an active, and those its standby follows."""
    from ..contract import subtopologies_of, task_partitions

    subs = subtopologies_of(app)
    return [
        (task_partitions(subs, cluster.topics, t), task_partitions(subs, cluster.topics, t, standby=True))
        for t in tasks
    ]


class State:
    """Mutable assignment during one run: Kafka's ``ClientState`` for every client at once."""

    __slots__ = ("active", "model", "standby", "warmup")

    def __init__(self, model: TaskModel) -> None:
        self.model = model
        self.active: list[set[int]] = [set() for _ in model.clients]
        self.standby: list[set[int]] = [set() for _ in model.clients]
        self.warmup: list[set[int]] = [set() for _ in model.clients]

    def holds(self, c: int, t: int) -> bool:
        """Kafka's ``hasAssignedTask``: active, standby or warm-up."""
        return t in self.active[c] or t in self.standby[c] or t in self.warmup[c]

    def load(self, c: int) -> float:
        """Kafka's ``assignedTaskLoad``: every assigned task per thread."""
        return (len(self.active[c]) + len(self.standby[c]) + len(self.warmup[c])) / self.model.threads[c]

    def active_load(self, c: int) -> float:
        return len(self.active[c]) / self.model.threads[c]

    def active_owner(self) -> list[int]:
        owner = [-1] * self.model.num_tasks
        for c, tasks in enumerate(self.active):
            for t in tasks:
                owner[t] = c
        return owner
