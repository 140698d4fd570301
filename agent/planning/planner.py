"""From a snapshot and a registration to a plan: the bridge between the agent and ``assignor``.

Plans are sticky to the last published plan of the same key: every member
claims what the last plan gave it (and what it was asked to revoke, which it
still holds until it does), so a change moves only what it must.  Locality
is judged in the group's fetch mode: ``nearest-replica`` (KIP-392 follower
fetching; the contract's definition) or ``leader`` (local only when the
leader is in the member's rack).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rackplan.assignor import (
    FOLLOW_UP_LIMIT,
    Cluster,
    ConsumerGroup,
    ConsumerPlan,
    InputError,
    StreamsApp,
    app_topics,
    cluster_document,
    group_topics,
    is_cross_rack,
    leader_cross_rack,
    parse_consumer_group,
    parse_streams_app,
    settle_cooperative,
    subtopologies_of,
    task_partitions,
)

from ..cluster.metadata import NO_LEADER, Snapshot
from ..core.errors import AgentError
from ..protocol.plans import CONSUMER, STREAMS, Locality, PlanRecord, fingerprint, plan_key
from ..protocol.registrations import planned_spec
from ..settings.sections import Settings
from .subscriptions import known_subscriptions
from .traffic_input import Traffic, with_traffic


class PlanSkipped(AgentError):
    """This registration cannot be planned now (bad registration, missing topic, assignor absent)."""


@dataclass(frozen=True, slots=True)
class Registration:
    key: str
    kind: str
    name: str
    #: the contract's ``consumer_group`` / ``streams_app`` object, as registered
    spec: Mapping[str, Any]
    fetch_mode: str
    topics: frozenset[str]
    fingerprint: str
    #: where its definition came from: file, topic, file+topic, discovered, file+discovered
    source: str = "file"

    @property
    def members(self) -> int:
        """Registered (or discovered) members or clients."""
        return len(self.spec.get("members" if self.kind == CONSUMER else "clients") or [])


def registration_topics(kind: str, spec: Mapping[str, Any]) -> frozenset[str]:
    """Every topic a plan of ``spec`` depends on: what its members read (and Streams changelogs).

    The contract's topics (:mod:`rackplan.assignor.contract`), plus a settings
    group's own ``topics`` (what its discovered members may subscribe to).
    """
    if kind == CONSUMER:
        extra = spec.get("topics")
        return group_topics(spec) | frozenset(t for t in extra or [] if isinstance(t, str))
    return app_topics(spec)


def make_registration(
    kind: str, spec: Mapping[str, Any], default_fetch_mode: str, source: str
) -> Registration:
    """A registration of an already validated ``consumer_group`` / ``streams_app`` object."""
    name = spec["group_id"] if kind == CONSUMER else spec["application_id"]
    mode = spec.get("fetch_mode", default_fetch_mode)
    return Registration(
        key=plan_key(kind, name),
        kind=kind,
        name=name,
        spec=spec,
        fetch_mode="leader" if mode == "leader" else "nearest-replica",
        topics=registration_topics(kind, spec),
        fingerprint=fingerprint(planned_spec(kind, spec)),
        source=source,
    )


def registrations(settings: Settings) -> list[Registration]:
    """Registrations from the settings file alone, sorted by key (see :mod:`rackplan.agent.groups.registry` for the merge)."""
    out = [make_registration(CONSUMER, g, settings.fetch_mode, "file") for g in settings.consumer_groups]
    out += [make_registration(STREAMS, a, settings.fetch_mode, "file") for a in settings.streams_apps]
    return sorted(out, key=lambda r: r.key)


def scope_fingerprint(
    snapshot: Snapshot, racks: Mapping[int, str | None], topics: Iterable[str], fetch_mode: str
) -> str:
    """Fingerprint of exactly what a plan depends on: its topics' replica rack sets (and leader racks).

    A reassignment inside a rack, or a leader move in nearest-replica mode,
    leaves it unchanged, so a restarted agent does not republish for it.
    """
    doc: dict[str, Any] = {}
    # Few distinct replica lists exist (brokers are few): each one's rack list is computed once.
    memo: dict[tuple[int, ...], list[str]] = {}
    for t in sorted(set(topics)):
        state = snapshot.topics.get(t)
        if state is None:
            doc[t] = None
            continue
        rows: list[Any] = []
        for p, replicas in enumerate(state.replicas):
            rs = memo.get(replicas)
            if rs is None:
                rs = memo[replicas] = sorted({r for r in (racks.get(b) for b in replicas) if r is not None})
            if fetch_mode == "leader":
                leader = state.leaders[p]
                rows.append([rs, None if leader == NO_LEADER else racks.get(leader)])
            else:
                rows.append(rs)
        doc[t] = rows
    return fingerprint(doc)


def fingerprint_topics(snapshot: Snapshot, reg: Registration) -> frozenset[str]:
    """The topics a plan's ``cluster_fingerprint`` covers (:func:`scope_fingerprint` over them).

    A consumer group's: the existing topics its members subscribe to, exactly
    the topics the Java plugins recompute it over (``RackplanServerAssignor``,
    ``RackplanAssignor``: the live subscriptions' topics the metadata has), so
    a plan of a group subscribed to a missing topic, or with a group-level
    ``topics`` no member reads, is not called stale by them.  A topic that is
    created later joins the set, so the fingerprint still changes and the
    group is planned again.  A Streams app's: every topic of the registration
    (no plugin checks it).
    """
    if reg.kind != CONSUMER:
        return reg.topics
    return frozenset(t for t in group_topics(reg.spec) if t in snapshot.topics)


#: The last snapshot's model: (snapshot, its racks, a Cluster of every topic asked for so far).
_model: list[tuple[Snapshot, dict[int, str | None], Cluster]] = []


def cluster_for(snapshot: Snapshot, racks: Mapping[int, str | None], topics: Iterable[str]) -> Cluster:
    """The assignor's model of ``snapshot`` restricted to ``topics``: ``snapshot.to_cluster(racks, topics)``.

    Built once per snapshot: each topic's replica-rack masks are computed the
    first time a group asks for it, then every group of the cycle gets a
    restriction of the same model (no mask computed twice).  Only the last
    snapshot is kept; a change of racks starts a new model.
    """
    rack_map = dict(racks)
    entry = _model[0] if _model else None
    if entry is None or entry[0] is not snapshot or entry[1] != rack_map:
        entry = (snapshot, rack_map, snapshot.to_cluster(rack_map, ()))
    wanted = set(topics)
    known = entry[2]
    missing = sorted(t for t in wanted if t in snapshot.topics and t not in known.topics)
    if missing:
        known = known.extend({t: snapshot.topics[t].replicas for t in missing})
        entry = (snapshot, rack_map, known)
    _model[:] = [entry]
    return known.restrict(wanted)


class LocalityJudge:
    """Counts cross-rack partitions of an assignment under one snapshot, in one fetch mode."""

    def __init__(self, cluster: Cluster, snapshot: Snapshot, racks: Mapping[int, str | None], mode: str):
        self.cluster = cluster
        self.mode = mode
        self._snapshot = snapshot
        self._racks = racks

    def cross(self, rack: str | None, topic: str, partition: int) -> bool | None:
        """True/False, or None when the partition does not exist (any more).

        An empty rack is no rack, as Kafka treats an empty ``client.rack``.
        """
        rack = rack or None
        masks = self.cluster.masks.get(topic)
        if masks is None or partition >= len(masks):
            return None
        if self.mode == "leader":
            leader = self._snapshot.topics[topic].leaders[partition]
            return leader_cross_rack(rack, None if leader == NO_LEADER else self._racks.get(leader))
        return is_cross_rack(rack, self.cluster.member_bit(rack), masks[partition])

    def verdicts(self, pairs: Iterable[tuple[str | None, str, int]]) -> Iterator[tuple[str | None, bool]]:
        """``(rack, cross)`` of each pair whose partition exists: :meth:`cross` without a call per pair.

        Counting runs over every partition of every plan; in nearest-replica
        mode each rack's mask bit is looked up once, not once per partition.
        """
        if self.mode == "leader":
            for rack, t, p in pairs:
                c = self.cross(rack, t, p)
                if c is not None:
                    yield rack, c
            return
        masks_of = self.cluster.masks
        bits: dict[str | None, int] = {}
        for rack, t, p in pairs:
            masks = masks_of.get(t)
            if masks is None or p >= len(masks):
                continue
            bit = bits.get(rack)
            if bit is None:
                bit = bits[rack] = self.cluster.member_bit(rack or None)
            yield rack, is_cross_rack(rack or None, bit, masks[p])

    def count(self, pairs: Iterable[tuple[str | None, str, int]]) -> Locality:
        cross = total = 0
        for _rack, c in self.verdicts(pairs):
            total += 1
            cross += c
        return Locality(cross, total)

    def count_by_rack(self, pairs: Iterable[tuple[str | None, str, int]]) -> dict[str | None, Locality]:
        """Locality per member rack (None: members without a rack); sums to :meth:`count`."""
        tallies: dict[str | None, list[int]] = {}
        for rack, c in self.verdicts(pairs):
            tally = tallies.setdefault(rack, [0, 0])
            tally[0] += c
            tally[1] += 1
        return {r: Locality(c, n) for r, (c, n) in tallies.items()}


def total_locality(by_rack: Mapping[str | None, Locality]) -> Locality:
    return Locality(sum(v.cross_rack for v in by_rack.values()), sum(v.total for v in by_rack.values()))


# ---- consumer groups ----------------------------------------------------------


def _consumer_pairs(
    assignment: Mapping[str, Sequence[Sequence[Any]]], racks: Mapping[str, str | None]
) -> Iterable[tuple[str | None, str, int]]:
    for mid in sorted(assignment):
        rack = racks.get(mid)
        for t, p in assignment[mid]:
            yield rack, t, p


def _planned_spec(snapshot: Snapshot, reg: Registration) -> Mapping[str, Any]:
    """The group as planned: subscriptions to topics the snapshot lacks left out (:mod:`.subscriptions`).

    :class:`PlanSkipped` when none of the group's topics exists: nothing to plan.
    """
    if reg.topics and reg.topics.isdisjoint(snapshot.topics):
        names = ", ".join(repr(t) for t in sorted(reg.topics)[:5])
        raise PlanSkipped(f"registration {reg.key}: no subscribed topic exists ({names})")
    return known_subscriptions(reg.spec, snapshot.topics)


def _sticky_consumer_spec(spec: Mapping[str, Any], last: PlanRecord | None) -> dict[str, Any]:
    """``spec`` with every member claiming what the last plan gave it (and what it still holds until it revokes)."""
    if last is None:
        return dict(spec)
    assignment = last.body.get("assignment") or {}
    revoked = last.body.get("revoked") or {}
    members = []
    for m in spec.get("members") or []:
        mid = m.get("member_id")
        owned = [list(tp) for tp in [*assignment.get(mid, []), *revoked.get(mid, [])]]
        # One generation: all believed.  The contract's member generation is Kafka's int32; a plan generation
        # may be up to 2**53-1, and only its equality across members matters here, so it is capped.
        members.append({**m, "owned": owned, "generation": min(last.generation, 2**31 - 1)})
    return {**spec, "members": members}


@dataclass(frozen=True, slots=True)
class PlanResult:
    document: dict[str, Any]
    moved: int
    before: Locality | None
    after: Locality
    #: ``after`` per member rack (None: members without a rack), for metrics
    after_by_rack: Mapping[str | None, Locality]


#: follow-up rounds a cooperative assignor gets to hand out what it withheld (one is enough for Kafka's);
#: what is still withheld after them stays unassigned until the next plan
COMPLETION_ROUNDS = FOLLOW_UP_LIMIT


def _run(cluster: Cluster, group: ConsumerGroup) -> tuple[ConsumerPlan, float]:
    from rackplan.assignor import run_assignor

    try:
        return run_assignor(cluster, group)
    except (ImportError, KeyError) as e:
        raise PlanSkipped(f"assignor {group.assignor!r} is not available: {e}") from None


def _moved(old: Mapping[str, Any], new: Mapping[str, Any]) -> int:
    """Partitions whose owner in ``new`` differs from the one in ``old`` (new or orphaned ones excluded)."""
    before = {tuple(tp): m for m, parts in old.items() for tp in parts}
    return sum(1 for m, parts in new.items() for tp in parts if before.get(tuple(tp), m) != m)


def plan_consumer(
    snapshot: Snapshot,
    racks: Mapping[int, str | None],
    reg: Registration,
    last: PlanRecord | None,
    complete: bool = False,
    traffic: Traffic | None = None,
) -> PlanResult:
    """The plan of a consumer group; ``complete``: with nothing withheld (for two-phase handovers).

    The registration is parsed once, against the snapshot's model; the
    follow-up rounds of ``complete`` stay typed (no document in between).
    """
    from rackplan.assignor import consumer_document as document

    if not reg.spec.get("members"):
        raise PlanSkipped(f"registration {reg.key}: no members registered or discovered")
    cluster = with_traffic(cluster_for(snapshot, racks, reg.topics), reg.kind, reg.spec, traffic)
    try:
        group = parse_consumer_group(_sticky_consumer_spec(_planned_spec(snapshot, reg), last), cluster)
    except InputError as e:
        raise PlanSkipped(f"registration {reg.key}: {e}") from None
    plan, elapsed_ms = _run(cluster, group)
    if not complete:
        doc = document(cluster, group, plan, elapsed_ms)
    else:
        end = settle_cooperative(
            group, plan, elapsed_ms, lambda g: _run(cluster, g), COMPLETION_ROUNDS, lambda _g: 1
        )
        doc = document(cluster, end.group, end.plan, end.elapsed_ms)
        doc["consumer_group"]["revoked"] = {}  # anything still withheld stays unassigned until the next plan
        if last is not None:
            doc["stats"]["moved"] = _moved(
                last.body.get("assignment") or {}, doc["consumer_group"]["assignment"]
            )
    judge = LocalityJudge(cluster, snapshot, racks, reg.fetch_mode)
    member_racks = {m.member_id: m.rack for m in group.members}
    by_rack = judge.count_by_rack(_consumer_pairs(doc["consumer_group"]["assignment"], member_racks))
    before = None
    if last is not None:
        before = judge.count(_consumer_pairs(last.body.get("assignment") or {}, member_racks))
    return PlanResult(doc, int(doc["stats"].get("moved", 0)), before, total_locality(by_rack), by_rack)


# ---- Streams apps -------------------------------------------------------------


def _streams_pairs(
    cluster: Cluster, spec: Mapping[str, Any] | StreamsApp, assignment: Mapping[str, Any]
) -> Iterable[tuple[str | None, str, int]]:
    """(client rack, topic, partition) of every active task's partitions (:func:`~rackplan.assignor.contract.task_partitions`)."""
    subs = subtopologies_of(spec)
    if isinstance(spec, StreamsApp):
        racks = {c.process_id: c.rack for c in spec.clients}
    else:
        racks = {c.get("process_id"): c.get("rack") for c in spec.get("clients") or []}
    for pid in sorted(assignment):
        tasks = assignment[pid].get("active") or [] if isinstance(assignment[pid], dict) else []
        for task in tasks:
            for t, p in task_partitions(subs, cluster.topics, task):
                yield racks.get(pid), t, p


def _sticky_streams_spec(spec: Mapping[str, Any], last: PlanRecord | None) -> dict[str, Any]:
    """``spec`` with every client's previous tasks those of the last plan."""
    if last is None:
        return dict(spec)
    assignment = last.body.get("assignment") or {}
    clients = []
    for c in spec.get("clients") or []:
        prev = assignment.get(c.get("process_id")) or {}
        clients.append(
            {
                **c,
                "previous_active": list(prev.get("active") or []),
                "previous_standby": list(prev.get("standby") or []),
            }
        )
    return {**spec, "clients": clients}


def plan_streams(
    snapshot: Snapshot,
    racks: Mapping[int, str | None],
    reg: Registration,
    last: PlanRecord | None,
    traffic: Traffic | None = None,
) -> PlanResult:
    from rackplan.assignor import plan_model as plan_document

    if not reg.spec.get("clients"):
        raise PlanSkipped(f"registration {reg.key}: no clients registered")
    cluster = with_traffic(cluster_for(snapshot, racks, reg.topics), reg.kind, reg.spec, traffic)
    try:
        app = parse_streams_app(_sticky_streams_spec(reg.spec, last), cluster)
    except InputError as e:
        raise PlanSkipped(f"registration {reg.key}: {e}") from None
    try:
        doc = plan_document(cluster, app)
    except NotImplementedError as e:
        raise PlanSkipped(f"Streams assignment not available yet: {e}") from None
    judge = LocalityJudge(cluster, snapshot, racks, reg.fetch_mode)
    new_assignment = doc["streams_app"]["assignment"]
    by_rack = judge.count_by_rack(_streams_pairs(cluster, reg.spec, new_assignment))
    before = None
    moved = 0
    if last is not None:
        old_assignment = last.body.get("assignment") or {}
        before = judge.count(_streams_pairs(cluster, reg.spec, old_assignment))
        old_owner = {t: pid for pid, a in old_assignment.items() for t in a.get("active") or []}
        moved = sum(
            1
            for pid, a in new_assignment.items()
            for t in a.get("active") or []
            if t in old_owner and old_owner[t] != pid
        )
    return PlanResult(doc, moved, before, total_locality(by_rack), by_rack)


def plan_for(
    snapshot: Snapshot,
    racks: Mapping[int, str | None],
    reg: Registration,
    last: PlanRecord | None,
    complete: bool = False,
    traffic: Traffic | None = None,
) -> PlanResult:
    """The next plan of ``reg``; ``traffic``: measured bytes/s, used only by groups that weigh bytes."""
    if reg.kind == CONSUMER:
        return plan_consumer(snapshot, racks, reg, last, complete, traffic)
    return plan_streams(snapshot, racks, reg, last, traffic)


def instance_document(
    snapshot: Snapshot, racks: Mapping[int, str | None], reg: Registration, last: PlanRecord | None
) -> dict[str, Any]:
    """The contract input a plan of ``reg`` is computed from, so it can be checked like ``rackplan assign``."""
    cluster = cluster_for(snapshot, racks, reg.topics)
    doc: dict[str, Any] = {
        "cluster": cluster_document(cluster)
    }  # brokers sorted by id, as to_cluster makes them
    if reg.kind == CONSUMER:
        doc["consumer_group"] = _sticky_consumer_spec(known_subscriptions(reg.spec, snapshot.topics), last)
    else:
        doc["streams_app"] = _sticky_streams_spec(reg.spec, last)
    return doc


def current_locality_by_rack(
    snapshot: Snapshot, racks: Mapping[int, str | None], reg: Registration, last: PlanRecord
) -> dict[str | None, Locality]:
    """Locality of the last plan (the group's assignment as far as the agent knows) per member rack."""
    cluster = cluster_for(snapshot, racks, reg.topics)
    judge = LocalityJudge(cluster, snapshot, racks, reg.fetch_mode)
    if reg.kind == CONSUMER:
        member_racks = {m.get("member_id"): m.get("rack") for m in reg.spec.get("members") or []}
        return judge.count_by_rack(_consumer_pairs(last.body.get("assignment") or {}, member_racks))
    return judge.count_by_rack(_streams_pairs(cluster, reg.spec, last.body.get("assignment") or {}))


def current_locality(
    snapshot: Snapshot, racks: Mapping[int, str | None], reg: Registration, last: PlanRecord
) -> Locality:
    """Locality of the last plan under a snapshot."""
    return total_locality(current_locality_by_rack(snapshot, racks, reg, last))


def assignment_locality(
    snapshot: Snapshot,
    racks: Mapping[int, str | None],
    reg: Registration,
    assignment: Mapping[str, Sequence[Sequence[Any]]],
    member_racks: Mapping[str, str | None],
) -> Locality:
    """Locality of a consumer group's real assignment (member id -> [topic, partition]) under a snapshot."""
    topics = {t for parts in assignment.values() for t, _ in parts}
    cluster = cluster_for(snapshot, racks, topics)
    judge = LocalityJudge(cluster, snapshot, racks, reg.fetch_mode)
    return judge.count(_consumer_pairs(assignment, member_racks))
