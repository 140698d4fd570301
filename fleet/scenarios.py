"""Declarative what-ifs, applied to snapshots as pure, seeded functions.

A scenario is a name and a list of steps; each step changes the cluster
(lose or add a rack, move replicas, raise a replication factor) or a group's
members (shift some to another rack).  Every random choice comes from a
generator seeded with the step's ``seed``, the cluster id and the topic or
group it concerns, so the same scenario on the same snapshot always gives
the same result, and a step on one topic never depends on other topics.
That locality is what lets the Spark job apply a scenario to each group's
slice of a snapshot and get the slice of the whole.

File (YAML or JSON), a list or ``{"scenarios": [...]}``::

    - name: lose-az-a
      steps: [{kind: lose_rack, rack: az-a}]
    - {name: shift-30pc, kind: shift_members, fraction: 0.3, to_rack: az-b, seed: 7}

The identity scenario ``baseline`` is always evaluated first; the name is reserved.
"""

from __future__ import annotations

import fnmatch
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from rackplan.agent.cluster.archive import ClusterState, Replicas
from rackplan.agent.cluster.metadata import NO_LEADER

BASELINE = "baseline"
CONSUMER = "consumer"
STREAMS = "streams"


class NotApplicable(Exception):
    """The scenario makes no sense on this cluster or group (e.g. it has no such rack)."""


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LoseRack(_Step):
    """Every broker of ``rack`` is gone: its replicas stop serving, leadership moves on.

    Replicas on lost brokers leave the replica lists; a partition whose
    leader was lost is led by its first surviving replica (offline when none).
    Members in the lost rack are ``relocate``-d round-robin to the surviving
    racks (what a scheduler does with the pods), ``drop``-ped, or ``keep``
    their rack (then every read they make crosses racks).
    """

    kind: Literal["lose_rack"]
    rack: str
    members: Literal["relocate", "drop", "keep"] = "relocate"


class AddRack(_Step):
    """A new rack with ``brokers`` brokers; ``reassign_fraction`` of every matching topic's
    partitions move one replica there (default ``1 / (racks + 1)``, its fair share)."""

    kind: Literal["add_rack"]
    rack: str
    #: at most 10,000: a billion brokers (a typo) would hang the run building them
    brokers: int = Field(default=0, ge=0, le=10_000, description="0: the average brokers per existing rack")
    reassign_fraction: float | None = Field(default=None, ge=0.0, le=1.0)
    topics: str = "*"
    seed: int = 0


class MoveReplicas(_Step):
    """Move one replica of ``count`` partitions of each topic matching ``topic`` to ``to_rack``
    (or to another rack chosen at random), taking it from ``from_rack`` when given."""

    kind: Literal["move_replicas"]
    topic: str
    count: int = Field(ge=1)
    to_rack: str | None = None
    from_rack: str | None = None
    seed: int = 0


class RaiseReplicationFactor(_Step):
    """Add replicas until every partition of the matching topics has ``replication_factor``;
    each new replica goes to the rack with the fewest replicas of that partition."""

    kind: Literal["raise_rf"]
    topic: str
    replication_factor: int = Field(ge=1)
    seed: int = 0


class ShiftMembers(_Step):
    """Move ``fraction`` of the members (consumers, or Streams clients) of matching groups
    to ``to_rack``; only members not already there (and on ``from_rack``, when given)."""

    kind: Literal["shift_members"]
    fraction: float = Field(ge=0.0, le=1.0)
    to_rack: str
    from_rack: str | None = None
    groups: str = "*"
    seed: int = 0


Step = Annotated[
    LoseRack | AddRack | MoveReplicas | RaiseReplicationFactor | ShiftMembers, Field(discriminator="kind")
]


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    description: str = ""
    #: fnmatch pattern on cluster ids: elsewhere the scenario is not evaluated
    clusters: str = "*"
    steps: tuple[Step, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _single_step(cls, v: Any) -> Any:
        # Shorthand: a scenario with a ``kind`` is a scenario of that one step.
        if isinstance(v, dict) and "kind" in v:
            meta = {k: v[k] for k in ("name", "description", "clusters") if k in v}
            step = {k: x for k, x in v.items() if k not in meta}
            return {**meta, "steps": [step]}
        return v

    def applies_to(self, cluster_id: str) -> bool:
        return fnmatch.fnmatchcase(cluster_id, self.clusters)


BASELINE_SCENARIO = Scenario(name=BASELINE, description="the snapshot as it is")

_SCENARIOS = TypeAdapter(list[Scenario])


def parse_scenarios(data: Any) -> list[Scenario]:
    """Validated scenarios, ``baseline`` first; names must be unique."""
    if isinstance(data, dict) and "scenarios" in data:
        data = data["scenarios"]
    if data is None:
        data = []
    scenarios = _SCENARIOS.validate_python(data)
    names = [s.name for s in scenarios]
    if BASELINE in names:
        raise ValueError(f"scenario name {BASELINE!r} is reserved for the snapshot as it is")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"duplicate scenario names: {', '.join(dupes)}")
    return [BASELINE_SCENARIO, *scenarios]


def load_scenarios(path: str | Path | None) -> list[Scenario]:
    """Scenarios from a YAML/JSON file (``None``: only the baseline).

    Raises :class:`~rackplan.agent.settings.errors.SettingsError`, one line naming ``--scenarios``, the
    file and what is wrong (the line of a YAML error, the key of a bad field), as settings errors do.
    """
    from pydantic import ValidationError

    from rackplan.agent.settings.errors import SettingsError, describe_error
    from rackplan.agent.settings.yaml_file import read_yaml

    if path is None:
        return [BASELINE_SCENARIO]
    try:
        return parse_scenarios(read_yaml(path, "the scenarios file"))
    except ValidationError as e:
        raise SettingsError(f"--scenarios {path}: {describe_error(e)}") from None
    except ValueError as e:  # the YAML (its file and line are named) or a rule of parse_scenarios
        where = "" if str(e).startswith(str(path)) else f"{path}: "
        raise SettingsError(f"--scenarios {where}{' '.join(str(e).split())}") from None


def scenarios_json(scenarios: Sequence[Scenario]) -> list[dict[str, Any]]:
    return [s.model_dump(mode="json") for s in scenarios if s.name != BASELINE]


# ---- application ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Unit:
    """A slice of a snapshot: one group or app and the part of the cluster it reads."""

    cluster_id: str
    kind: str  # CONSUMER or STREAMS
    state: ClusterState
    #: the contract's ``consumer_group`` / ``streams_app`` object (may carry ``fetch_mode``)
    spec: Mapping[str, Any]

    @property
    def name(self) -> str:
        return str(self.spec["group_id" if self.kind == CONSUMER else "application_id"])


def _rng(seed: int, *parts: object) -> random.Random:
    # String seeds hash with sha512: the same sequence in every process, whatever PYTHONHASHSEED.
    return random.Random("|".join(str(p) for p in (seed, *parts)))


def _round(x: float) -> int:
    return math.floor(x + 0.5)


def _members_key(kind: str) -> tuple[str, str]:
    return ("members", "member_id") if kind == CONSUMER else ("clients", "process_id")


def _with_members(spec: Mapping[str, Any], kind: str, members: list[dict[str, Any]]) -> dict[str, Any]:
    out = dict(spec)
    out[_members_key(kind)[0]] = members
    return out


def _members(spec: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    key, _ = _members_key(kind)
    return [dict(m) for m in spec.get(key) or [] if isinstance(m, dict)]


def _lead(replicas: tuple[int, ...], leader: int, gone: frozenset[int]) -> int:
    if leader != NO_LEADER and leader not in gone:
        return leader
    return replicas[0] if replicas else NO_LEADER


def lose_rack(unit: Unit, step: LoseRack) -> Unit:
    st = unit.state
    gone = frozenset(b for b, r in st.brokers if r == step.rack)
    if not gone:
        raise NotApplicable(f"no broker in rack {step.rack!r}")
    survivors = tuple((b, r) for b, r in st.brokers if b not in gone)
    if not survivors:
        raise NotApplicable(f"losing rack {step.rack!r} loses every broker")
    topics: dict[str, Replicas] = {}
    leaders: dict[str, tuple[int, ...]] = {}
    for t, parts in st.topics.items():
        kept = tuple(tuple(b for b in r if b not in gone) for r in parts)
        topics[t] = kept
        leaders[t] = tuple(_lead(kept[p], st.leaders[t][p], gone) for p in range(len(parts)))
    state = ClusterState(brokers=survivors, topics=topics, leaders=leaders, traffic=st.traffic)
    spec: Mapping[str, Any] = unit.spec
    if step.members != "keep":
        _, id_key = _members_key(unit.kind)
        members = _members(unit.spec, unit.kind)
        lost = sorted(str(m.get(id_key)) for m in members if m.get("rack") == step.rack)
        racks = sorted({r for _, r in survivors if r is not None})
        if step.members == "drop":
            members = [m for m in members if m.get("rack") != step.rack]
            if not members:
                raise NotApplicable(f"every member of {unit.name!r} was in rack {step.rack!r}")
        elif racks:
            target = {mid: racks[i % len(racks)] for i, mid in enumerate(lost)}
            for m in members:
                if m.get("rack") == step.rack:
                    m["rack"] = target[str(m.get(id_key))]
        spec = _with_members(unit.spec, unit.kind, members)
    return Unit(unit.cluster_id, unit.kind, state, spec)


def add_rack(unit: Unit, step: AddRack) -> Unit:
    st = unit.state
    racks = st.racks()
    if step.rack in racks:
        raise NotApplicable(f"rack {step.rack!r} already exists")
    count = step.brokers
    if count == 0:
        count = max(1, _round(len([b for b, r in st.brokers if r is not None]) / max(1, len(racks))))
    first = max((b for b, _ in st.brokers), default=0) + 1
    new = list(range(first, first + count))
    fraction = step.reassign_fraction if step.reassign_fraction is not None else 1.0 / (len(racks) + 1)
    topics = dict(st.topics)
    leaders = dict(st.leaders)
    for t in sorted(st.topics):
        if not fnmatch.fnmatchcase(t, step.topics):
            continue
        rng = _rng(step.seed, "add_rack", unit.cluster_id, step.rack, t)
        parts = [list(r) for r in st.topics[t]]
        lead = list(st.leaders[t])
        movable = [p for p, r in enumerate(parts) if r]
        chosen = sorted(rng.sample(movable, min(len(movable), _round(fraction * len(movable)))))
        offset = rng.randrange(count)
        for i, p in enumerate(chosen):
            r = parts[p]
            # A non-leader replica moves, so leadership stays where it is; a partition whose
            # only replica is its leader moves that one, and its leadership with it.
            followers = [k for k, b in enumerate(r) if b != lead[p]]
            pos = rng.choice(followers) if followers else 0
            broker = new[(offset + i) % count]
            if lead[p] == r[pos]:
                lead[p] = broker
            r[pos] = broker
        topics[t] = tuple(tuple(r) for r in parts)
        leaders[t] = tuple(lead)
    brokers = tuple(sorted([*st.brokers, *((b, step.rack) for b in new)]))
    return Unit(unit.cluster_id, unit.kind, ClusterState(brokers, topics, leaders, st.traffic), unit.spec)


def _by_rack(st: ClusterState) -> dict[str | None, list[int]]:
    out: dict[str | None, list[int]] = {}
    for b, r in st.brokers:
        out.setdefault(r, []).append(b)
    return out


def move_replicas(unit: Unit, step: MoveReplicas) -> Unit:
    st = unit.state
    racks = st.racks()
    for named in (step.to_rack, step.from_rack):
        if named is not None and named not in racks:
            raise NotApplicable(f"no broker in rack {named!r}")
    rack_of = st.broker_racks()
    by_rack = _by_rack(st)
    topics = dict(st.topics)
    leaders = dict(st.leaders)
    for t in sorted(st.topics):
        if not fnmatch.fnmatchcase(t, step.topic):
            continue
        rng = _rng(step.seed, "move_replicas", unit.cluster_id, t)
        parts = [list(r) for r in st.topics[t]]
        lead = list(st.leaders[t])

        def sources(r: list[int]) -> list[int]:
            if step.from_rack is not None:
                return [k for k, b in enumerate(r) if rack_of[b] == step.from_rack]
            return [k for k, b in enumerate(r) if step.to_rack is None or rack_of[b] != step.to_rack]

        def targets(r: list[int], src_rack: str | None) -> list[int]:
            if step.to_rack is not None:
                return [b for b in by_rack[step.to_rack] if b not in r]
            return [b for rk in racks if rk != src_rack for b in by_rack[rk] if b not in r]

        candidates = [p for p, r in enumerate(parts) if any(targets(r, rack_of[r[k]]) for k in sources(r))]
        for p in sorted(rng.sample(candidates, min(step.count, len(candidates)))):
            r = parts[p]
            ks = [k for k in sources(r) if targets(r, rack_of[r[k]])]
            k = rng.choice(ks)
            if step.to_rack is not None:
                broker = rng.choice(targets(r, rack_of[r[k]]))
            else:
                options = sorted({rack_of[b] for b in targets(r, rack_of[r[k]])}, key=str)
                rack = rng.choice(options)
                broker = rng.choice([b for b in by_rack[rack] if b not in r])
            if lead[p] == r[k]:
                lead[p] = broker
            r[k] = broker
        topics[t] = tuple(tuple(r) for r in parts)
        leaders[t] = tuple(lead)
    return Unit(unit.cluster_id, unit.kind, ClusterState(st.brokers, topics, leaders, st.traffic), unit.spec)


def raise_rf(unit: Unit, step: RaiseReplicationFactor) -> Unit:
    st = unit.state
    rack_of = st.broker_racks()
    by_rack = _by_rack(st)
    topics = dict(st.topics)
    for t in sorted(st.topics):
        if not fnmatch.fnmatchcase(t, step.topic):
            continue
        rng = _rng(step.seed, "raise_rf", unit.cluster_id, t)
        parts = []
        for r in st.topics[t]:
            replicas = list(r)
            while len(replicas) < step.replication_factor:
                held: dict[str | None, int] = {}
                for b in replicas:
                    held[rack_of[b]] = held.get(rack_of[b], 0) + 1
                open_racks = [rk for rk, bs in by_rack.items() if any(b not in replicas for b in bs)]
                if not open_racks:
                    break  # fewer brokers than the factor: as many replicas as brokers
                # Fewest replicas of this partition first; ties at random (seeded).
                keyed = sorted((held.get(rk, 0), rng.random(), str(rk), rk) for rk in open_racks)
                rack = keyed[0][3]
                replicas.append(rng.choice([b for b in by_rack[rack] if b not in replicas]))
            parts.append(tuple(replicas))
        topics[t] = tuple(parts)
    return Unit(
        unit.cluster_id, unit.kind, ClusterState(st.brokers, topics, st.leaders, st.traffic), unit.spec
    )


def shift_members(unit: Unit, step: ShiftMembers) -> Unit:
    if not fnmatch.fnmatchcase(unit.name, step.groups):
        return unit
    _, id_key = _members_key(unit.kind)
    members = _members(unit.spec, unit.kind)
    eligible = sorted(
        str(m.get(id_key))
        for m in members
        if m.get("rack") != step.to_rack and (step.from_rack is None or m.get("rack") == step.from_rack)
    )
    rng = _rng(step.seed, "shift_members", unit.cluster_id, unit.kind, unit.name)
    chosen = set(rng.sample(eligible, min(len(eligible), _round(step.fraction * len(eligible)))))
    for m in members:
        if str(m.get(id_key)) in chosen:
            m["rack"] = step.to_rack
    return Unit(unit.cluster_id, unit.kind, unit.state, _with_members(unit.spec, unit.kind, members))


def apply_step(unit: Unit, step: Any) -> Unit:
    if isinstance(step, LoseRack):
        return lose_rack(unit, step)
    if isinstance(step, AddRack):
        return add_rack(unit, step)
    if isinstance(step, MoveReplicas):
        return move_replicas(unit, step)
    if isinstance(step, RaiseReplicationFactor):
        return raise_rf(unit, step)
    if isinstance(step, ShiftMembers):
        return shift_members(unit, step)
    raise TypeError(f"unknown step {step!r}")


def apply(scenario: Scenario, unit: Unit) -> Unit:
    """The unit as the scenario would make it; :class:`NotApplicable` when it cannot apply."""
    if not scenario.applies_to(unit.cluster_id):
        raise NotApplicable(f"scenario {scenario.name!r} does not apply to cluster {unit.cluster_id!r}")
    for step in scenario.steps:
        unit = apply_step(unit, step)
    return unit


def offline_partitions(state: ClusterState) -> int:
    """Partitions with no replica left (after a lost rack): nobody can read them."""
    return sum(1 for parts in state.topics.values() for r in parts if not r)
