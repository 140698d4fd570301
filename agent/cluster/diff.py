"""What changed between two snapshots, in the terms plans care about: racks.

Pure functions.  A partition changes when the *set of racks* of its replicas
changes (offline and out-of-sync replicas count: they are still replicas), or
its leader's rack does; a reassignment inside one rack changes nothing.
Topics whose replica lists and leaders are identical (equal fingerprints) and
whose brokers kept their racks are skipped without looking at partitions, so a
poll that finds nothing new costs one comparison per topic.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from .metadata import NO_LEADER, Snapshot, TopicState

REPLICA_RACKS = "replica_racks"
LEADER_RACK = "leader_rack"
TOPIC_ADDED = "topic_added"
TOPIC_REMOVED = "topic_removed"
PARTITIONS_ADDED = "partitions_added"
PARTITIONS_REMOVED = "partitions_removed"
BROKER_RACK = "broker_rack"

_TITLES = {
    REPLICA_RACKS: "replica racks changed",
    LEADER_RACK: "leader rack changed",
    TOPIC_ADDED: "topics added",
    TOPIC_REMOVED: "topics removed",
    PARTITIONS_ADDED: "partitions added",
    PARTITIONS_REMOVED: "partitions removed",
    BROKER_RACK: "broker racks changed",
}
_ORDER = tuple(_TITLES)


def change_title(kind: str) -> str:
    """``replica_racks`` -> ``replica racks changed``: how a change kind reads in a sentence."""
    return _TITLES.get(kind, kind)


@dataclass(frozen=True, slots=True)
class Change:
    kind: str
    #: topic, or None for a broker change
    topic: str | None = None
    #: partition, or None for whole-topic and broker changes
    partition: int | None = None
    broker: int | None = None
    before: str = ""
    after: str = ""

    def label(self) -> str:
        if self.kind == BROKER_RACK:
            return f"broker {self.broker}"
        if self.partition is None:
            return str(self.topic)
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class SnapshotDiff:
    changes: tuple[Change, ...] = ()
    #: topics with any change; a broker rack change touches every topic it holds replicas of
    touched_topics: frozenset[str] = frozenset()
    #: topic (None: broker changes) -> positions in ``changes``; built on first use
    _index: dict[str | None, list[int]] | None = field(default=None, compare=False, repr=False)

    @property
    def empty(self) -> bool:
        return not self.changes

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.changes:
            out[c.kind] = out.get(c.kind, 0) + 1
        return {k: out[k] for k in _ORDER if k in out}

    def _positions(self, topics: Collection[str] | None) -> list[int]:
        """Positions of the changes about ``topics`` (and of every broker change), in order."""
        if topics is None:
            return list(range(len(self.changes)))
        index = self._index
        if index is None:
            index = {}
            for i, c in enumerate(self.changes):
                index.setdefault(c.topic, []).append(i)
            object.__setattr__(self, "_index", index)
        out = list(index.get(None, ()))
        for t in set(topics):
            out.extend(index.get(t, ()))
        return sorted(out)

    def reason(self, topics: Collection[str] | None = None, limit: int = 8, leaders: bool = True) -> str:
        """``replica racks changed: orders-3, orders-7; topics added: x`` restricted to ``topics``.

        Costs the changes about ``topics``, not all changes: a large change
        explains itself to hundreds of groups.
        """
        by_kind: dict[str, list[str]] = {}
        for i in self._positions(topics):
            c = self.changes[i]
            if c.kind == LEADER_RACK and not leaders:
                continue
            by_kind.setdefault(c.kind, []).append(c.label())
        parts = []
        for kind in _ORDER:
            labels = by_kind.get(kind)
            if labels:
                more = f" (+{len(labels) - limit} more)" if len(labels) > limit else ""
                parts.append(f"{_TITLES[kind]}: {', '.join(labels[:limit])}{more}")
        return "; ".join(parts)


def _rack_set(replicas: tuple[int, ...], racks: Mapping[int, str | None]) -> frozenset[str]:
    return frozenset(r for r in (racks.get(b) for b in replicas) if r is not None)


def _fmt(racks: frozenset[str]) -> str:
    return ",".join(sorted(racks)) or "-"


def _leader_rack(leader: int, racks: Mapping[int, str | None]) -> str | None:
    return None if leader == NO_LEADER else racks.get(leader)


class _RackSets:
    """Rack set of each distinct replica list under one rack map, computed once.

    Replica lists repeat (a cluster of a few brokers has few distinct ones),
    so a rack change that reaches every partition costs one lookup each.
    """

    __slots__ = ("_sets", "racks")

    def __init__(self, racks: Mapping[int, str | None]) -> None:
        self.racks = racks
        self._sets: dict[tuple[int, ...], frozenset[str]] = {}

    def of(self, replicas: tuple[int, ...]) -> frozenset[str]:
        out = self._sets.get(replicas)
        if out is None:
            out = self._sets[replicas] = _rack_set(replicas, self.racks)
        return out


def _diff_topic(
    topic: str,
    old: TopicState,
    new: TopicState,
    old_sets: _RackSets,
    new_sets: _RackSets,
    out: list[Change],
) -> None:
    old_racks, new_racks = old_sets.racks, new_sets.racks
    n_old, n_new = len(old.replicas), len(new.replicas)
    for p in range(min(n_old, n_new)):
        a, b = old.replicas[p], new.replicas[p]
        if a != b or old_racks is not new_racks:
            ra, rb = old_sets.of(a), new_sets.of(b)
            if ra != rb:
                out.append(Change(REPLICA_RACKS, topic, p, before=_fmt(ra), after=_fmt(rb)))
        la, lb = old.leaders[p], new.leaders[p]
        if la != lb or old_racks is not new_racks:
            ra_l, rb_l = _leader_rack(la, old_racks), _leader_rack(lb, new_racks)
            if ra_l != rb_l:
                out.append(Change(LEADER_RACK, topic, p, before=ra_l or "-", after=rb_l or "-"))
    if n_new > n_old:
        out.append(Change(PARTITIONS_ADDED, topic, before=str(n_old), after=str(n_new)))
    elif n_new < n_old:
        out.append(Change(PARTITIONS_REMOVED, topic, before=str(n_old), after=str(n_new)))


def diff(
    old: Snapshot,
    new: Snapshot,
    old_racks: Mapping[int, str | None],
    new_racks: Mapping[int, str | None],
) -> SnapshotDiff:
    """Rack-relevant changes from ``old`` to ``new``, each with racks already resolved.

    Pass racks from :meth:`Snapshot.resolve_racks` so a broker that briefly
    reports no rack keeps its known one.  Output order is deterministic.
    """
    changes: list[Change] = []
    moved_brokers = sorted(
        b
        for b in set(old_racks).intersection(new_racks)
        if old_racks[b] != new_racks[b] and new_racks[b] is not None
    )
    for b in moved_brokers:
        changes.append(Change(BROKER_RACK, broker=b, before=old_racks[b] or "-", after=new_racks[b] or "-"))
    racks_same = not moved_brokers and all(old_racks.get(b) == new_racks.get(b) for b in new.replica_brokers)
    # With identical rack maps, one shared map lets _diff_topic skip rack lookups of unchanged lists.
    nr = old_racks if racks_same else new_racks
    touched: set[str] = set()
    old_sets = _RackSets(old_racks)
    new_sets = old_sets if nr is old_racks else _RackSets(nr)
    for topic in sorted(set(old.topics).union(new.topics)):
        ta, tb = old.topics.get(topic), new.topics.get(topic)
        if ta is None:
            changes.append(Change(TOPIC_ADDED, topic, after=str(len(tb.replicas) if tb else 0)))
            touched.add(topic)
            continue
        if tb is None:
            changes.append(Change(TOPIC_REMOVED, topic, before=str(len(ta.replicas))))
            touched.add(topic)
            continue
        if racks_same and ta.fingerprint == tb.fingerprint and ta == tb:
            continue
        before = len(changes)
        _diff_topic(topic, ta, tb, old_sets, new_sets, changes)
        if len(changes) > before:
            touched.add(topic)
    return SnapshotDiff(changes=tuple(changes), touched_topics=frozenset(touched))


def hold_reassignments(acted: Snapshot, new: Snapshot) -> Snapshot:
    """``new`` with every partition that is being reassigned shown as it was in ``acted``.

    While Kafka moves a partition, its replica list is the union of the old
    and the new replicas, and the added ones are out of the ISR until they
    catch up; then the old ones are dropped.  Acting on the union would publish
    a plan for a state that lasts only as long as the copy, then another: a
    flap.  A partition whose replicas are a strict superset of the acted-on
    ones with some replica out of sync is held at its acted-on replicas until
    the reassignment completes (or its new replicas join the ISR: a lasting
    replication-factor increase is then acted on).
    """
    held: dict[str, TopicState] = {}
    for name, state in new.topics.items():
        if not state.syncing:
            continue
        before = acted.topics.get(name)
        if before is None:
            continue
        replicas = list(state.replicas)
        for p in state.syncing:
            if p < len(before.replicas) and set(replicas[p]) > set(before.replicas[p]):
                replicas[p] = before.replicas[p]
        if replicas != list(state.replicas):
            held[name] = TopicState(tuple(replicas), state.leaders, state.syncing)
    if not held:
        return new
    return Snapshot(
        brokers=new.brokers, topics={**new.topics, **held}, taken_at=new.taken_at, cluster_id=new.cluster_id
    )


T = TypeVar("T")


class Debounce(Generic[T]):
    """Confirm a change only after it was seen in ``polls`` consecutive polls.

    Feed every poll: ``observe(changed, state)``.  ``changed`` says whether the
    poll differs from the state last acted on; ``same(a, b)`` whether two
    pending states are the same change.  A flap back to the acted-on state, or
    a different change, restarts the count.  Returns the state to act on once
    confirmed, else None.
    """

    def __init__(self, polls: int, same: Callable[[T, T], bool]) -> None:
        if polls < 1:
            raise ValueError("polls must be at least 1")
        self.polls = polls
        self._same = same
        self._pending: T | None = None
        self._count = 0

    @property
    def pending_polls(self) -> int:
        return self._count

    def observe(self, changed: bool, state: T) -> T | None:
        if not changed:
            self._pending, self._count = None, 0
            return None
        if self._pending is not None and self._same(self._pending, state):
            self._count += 1
        else:
            self._count = 1
        self._pending = state
        if self._count >= self.polls:
            self._pending, self._count = None, 0
            return state
        return None
