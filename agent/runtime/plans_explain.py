"""``rackplan plans explain``: which partitions of a plan are read cross-rack and why, and what no assignment fixes.

Pure: an assignment (member -> ``[topic, partition]``), the members' racks as far as anyone
knows them, and the current metadata in; a :class:`Explanation` out.  Each partition gets one
verdict, in the contract's terms (docs/CONTRACT.md, :func:`rackplan.assignor.model.is_cross_rack`):

* ``local``: a replica (nearest-replica fetching) or the leader (leader fetching) is in the member's rack;
* ``cross_rack``: the member has a rack and no replica is in it (``no_replica_in_member_rack``), or
  the leader is in another rack (``leader_in_other_rack``);
* ``member_rack_unknown``: no registration and no ``rack_mapping`` rule places the member (or it has
  no ``client.rack``): its partitions are neither local nor cross-rack, never counted as local;
* ``partition_rack_unknown``: every replica (or the leader) is on a broker without a rack, or there
  is no leader: not cross-rack by the contract;
* ``missing``: the topic or partition is not in the metadata (deleted, or not created yet).

*Unfixable* partitions are those no member's rack reads locally: no replica (or leader) in any
rack the group's members are in: every member whose rack is given (the registered ones, from the
settings file and the registrations topic, whether the plan names them or not), as
:func:`~..planning.fixable.best_locality` counts them.  Rebalancing cannot make them local; only
moving replicas can.
The counts agree with the agent's own judge (:class:`~..planning.planner.LocalityJudge` and
``best_locality``), which the tests use as the oracle.

A Kafka Streams app's plan (:func:`explain_streams`) assigns tasks to clients, so each verdict is
one (client, task, role, topic partition): an active task's source partitions and, when its
sub-topology is stateful, its changelogs; a standby's or warm-up's changelogs only (the contract's
``task_partitions``).  Topics the metadata lacks are left out there, as the plan's statistics leave
them (a changelog not created yet costs nothing), so a Streams explanation has no ``missing``.  Its
active and standby cross-rack counts are the plan's ``active_cross_rack`` and ``standby_cross_rack``
on the same metadata; warm-ups are judged too, and counted apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rackplan.assignor import Subtopology, task_partitions

from ..cluster.metadata import NO_LEADER, Snapshot

LOCAL = "local"
CROSS_RACK = "cross_rack"
MEMBER_RACK_UNKNOWN = "member_rack_unknown"
PARTITION_RACK_UNKNOWN = "partition_rack_unknown"
MISSING = "missing"
#: why a cross-rack partition is cross-rack
NO_REPLICA_IN_RACK = "no_replica_in_member_rack"
LEADER_ELSEWHERE = "leader_in_other_rack"
#: a Streams client's roles, in the order they are listed
ROLES = ("active", "standby", "warmup")

Assignment = Mapping[str, Sequence[Sequence[Any]]]
#: a Streams plan's assignment: client (process id) -> role -> task ids
TaskAssignment = Mapping[str, Mapping[str, Sequence[str]]]


@dataclass(frozen=True, slots=True)
class Verdict:
    """One assigned partition judged: its member, the racks involved, and the verdict."""

    member: str
    member_rack: str | None
    topic: str
    partition: int
    verdict: str
    #: why (cross-rack partitions only): :data:`NO_REPLICA_IN_RACK` or :data:`LEADER_ELSEWHERE`
    why: str = ""
    replica_racks: tuple[str, ...] = ()
    leader_rack: str | None = None
    #: a Streams plan's task and the client's role for it (:data:`ROLES`); empty for a consumer group
    task: str = ""
    role: str = ""

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "member": self.member,
            "member_rack": self.member_rack,
            "topic": self.topic,
            "partition": self.partition,
            "verdict": self.verdict,
            "replica_racks": list(self.replica_racks),
            "leader_rack": self.leader_rack,
        }
        if self.why:
            out["why"] = self.why
        if self.role:
            out["task"], out["role"] = self.task, self.role
        return out


@dataclass(frozen=True, slots=True)
class Explanation:
    """Every assigned partition's verdict, and the partitions no rack of the group reads locally."""

    fetch_mode: str
    #: the racks the group's members are in (members of unknown rack aside), sorted
    member_racks: tuple[str, ...]
    verdicts: tuple[Verdict, ...]
    unfixable: tuple[Verdict, ...] = field(default=())

    def count(self, verdict: str) -> int:
        return sum(1 for v in self.verdicts if v.verdict == verdict)

    def counts(self) -> dict[str, int]:
        kinds = (LOCAL, CROSS_RACK, MEMBER_RACK_UNKNOWN, PARTITION_RACK_UNKNOWN, MISSING)
        return {"partitions": len(self.verdicts), **{k: self.count(k) for k in kinds}}

    def by_role(self) -> dict[str, dict[str, int]]:
        """A Streams explanation's (task, topic partition) pairs and cross-rack ones per role; {} otherwise."""
        out: dict[str, dict[str, int]] = {}
        for v in self.verdicts:
            if v.role:
                tally = out.setdefault(v.role, {"pairs": 0, CROSS_RACK: 0})
                tally["pairs"] += 1
                tally[CROSS_RACK] += v.verdict == CROSS_RACK
        return {r: out[r] for r in ROLES if r in out}

    def as_json(self) -> dict[str, Any]:
        roles = self.by_role()
        return {
            "fetch_mode": self.fetch_mode,
            "member_racks": list(self.member_racks),
            "counts": {**self.counts(), "unfixable": len(self.unfixable)}
            | ({"by_role": roles} if roles else {}),
            "cross_rack": [v.as_json() for v in self.verdicts if v.verdict == CROSS_RACK],
            "member_rack_unknown": [v.as_json() for v in self.verdicts if v.verdict == MEMBER_RACK_UNKNOWN],
            "partition_rack_unknown": [
                v.as_json() for v in self.verdicts if v.verdict == PARTITION_RACK_UNKNOWN
            ],
            "missing": [v.as_json() for v in self.verdicts if v.verdict == MISSING],
            "unfixable": [
                {"topic": v.topic, "partition": v.partition, "replica_racks": list(v.replica_racks)}
                | ({"leader_rack": v.leader_rack} if self.fetch_mode == "leader" else {})
                for v in self.unfixable
            ],
        }


def explain(
    assignment: Assignment,
    member_racks: Mapping[str, str | None],
    snapshot: Snapshot,
    racks: Mapping[int, str | None],
    fetch_mode: str,
) -> Explanation:
    """Judge every partition of ``assignment`` (module docstring).

    ``member_racks``: the rack of each member whose rack is known (a member absent from it, or
    mapped to None or ``""``, is of unknown rack), members the plan does not name included: their
    racks are the group's too; ``racks``: each broker's rack.
    """
    verdicts: list[Verdict] = []
    for member in sorted(assignment):
        rack = member_racks.get(member) or None
        for t, p in sorted((str(t), int(p)) for t, p in assignment[member]):
            verdicts.append(_judge(member, rack, t, p, snapshot, racks, fetch_mode))
    return _explanation(verdicts, _group_racks(member_racks), fetch_mode)


def explain_streams(
    assignment: TaskAssignment,
    subtopologies: Mapping[str, Subtopology],
    client_racks: Mapping[str, str | None],
    snapshot: Snapshot,
    racks: Mapping[int, str | None],
    fetch_mode: str,
) -> Explanation:
    """Judge every (client, task, role, topic partition) of a Streams plan (module docstring).

    ``subtopologies``: the app's, by id (:func:`rackplan.assignor.subtopologies_of` of its registration);
    ``client_racks``: each client's registered rack (absent, None or ``""``: unknown), clients the plan
    gives no task included.
    """
    topics = {t: state.replicas for t, state in snapshot.topics.items()}
    verdicts: list[Verdict] = []
    for client in sorted(assignment):
        rack = client_racks.get(client) or None
        roles = assignment[client]
        for role in ROLES:
            for task in roles.get(role) or []:
                parts = task_partitions(subtopologies, topics, str(task), standby=role != "active")
                for t, p in parts:
                    found = _judge(client, rack, t, p, snapshot, racks, fetch_mode)
                    verdicts.append(replace(found, task=str(task), role=role))
    return _explanation(verdicts, _group_racks(client_racks), fetch_mode)


def _explanation(verdicts: list[Verdict], assigned_racks: set[str], fetch_mode: str) -> Explanation:
    """The verdicts with the group's racks (those of all its members) and the unfixable ones."""
    group_racks = tuple(sorted(assigned_racks))
    unfixable: dict[tuple[str, int], Verdict] = {}
    if group_racks:
        for v in verdicts:
            if v.verdict in (MISSING, PARTITION_RACK_UNKNOWN):
                continue
            readable = {v.leader_rack} if fetch_mode == "leader" else set(v.replica_racks)
            if readable and None not in readable and readable.isdisjoint(group_racks):
                unfixable.setdefault((v.topic, v.partition), v)
    return Explanation(
        fetch_mode, group_racks, tuple(verdicts), tuple(unfixable[k] for k in sorted(unfixable))
    )


def _group_racks(member_racks: Mapping[str, str | None]) -> set[str]:
    """Racks of every member whose rack is known, named by the plan or not: a member registered after the plan
    was made is a rack the next plan can read from (``best_locality`` counts the registered members alike)."""
    return {r for r in member_racks.values() if r}


def _judge(
    member: str,
    rack: str | None,
    topic: str,
    partition: int,
    snapshot: Snapshot,
    racks: Mapping[int, str | None],
    fetch_mode: str,
) -> Verdict:
    state = snapshot.topics.get(topic)
    if state is None or not 0 <= partition < len(state.replicas):
        return Verdict(member, rack, topic, partition, MISSING)
    replica_racks = tuple(sorted({r for b in state.replicas[partition] if (r := racks.get(b))}))
    leader = state.leaders[partition]
    leader_rack = None if leader == NO_LEADER else racks.get(leader) or None
    base = Verdict(member, rack, topic, partition, LOCAL, "", replica_racks, leader_rack)
    if rack is None:
        return _with(base, MEMBER_RACK_UNKNOWN)
    if fetch_mode == "leader":
        if leader_rack is None:
            return _with(base, PARTITION_RACK_UNKNOWN)
        return base if leader_rack == rack else _with(base, CROSS_RACK, LEADER_ELSEWHERE)
    if not replica_racks:
        return _with(base, PARTITION_RACK_UNKNOWN)
    return base if rack in replica_racks else _with(base, CROSS_RACK, NO_REPLICA_IN_RACK)


def _with(v: Verdict, verdict: str, why: str = "") -> Verdict:
    return replace(v, verdict=verdict, why=why)
