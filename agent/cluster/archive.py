"""Fleet snapshots: one JSON document per cluster, everything a what-if needs and nothing else.

A snapshot holds the brokers with racks and the topics with replica lists in
the contract's own shape (so ``{"cluster": {...}}`` of ``rackplan assign`` is
a projection of it), the leaders, per-partition traffic estimates where
known, and every group and app the agent plans (its settings file, the registrations
topic, discovered members).  It is a
plain document: the Spark job reads it without a Kafka client, and an archive
of snapshots (JSON lines) accumulates history at no extra cost.

Document (``schema`` 1)::

    {"schema": 1, "kind": "rackplan.snapshot", "cluster_id": "Lq0cWkd4Qh2y1yQ3mN9e8A",
     "cluster_name": "prod-eu",                      # optional: settings cluster_name, a label
     "taken_at": "2026-11-21T22:00:00Z", "fetch_mode": "nearest-replica",
     "brokers": [{"id": 1, "rack": "az-a"}],
     "topics": {"orders": [[1, 2], [2, 3]]},
     "leaders": {"orders": [1, 2]},                  # optional; -1: no leader
     "traffic": {"orders": [1200.5, null]},          # optional; bytes/s in, null: unknown
     "consumer_groups": [{...contract consumer_group..., "fetch_mode": "leader"}],
     "streams_apps": [{...contract streams_app...}]}
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..core.errors import AgentError
from ..protocol.plans import CONSUMER, STREAMS, plan_key
from ..settings.sections import Settings
from .metadata import NO_LEADER, Snapshot

SCHEMA = 1
KIND = "rackplan.snapshot"
FETCH_MODES = ("nearest-replica", "leader")

Replicas = tuple[tuple[int, ...], ...]


class SnapshotError(AgentError, ValueError):
    """A snapshot document that breaks the format; ``field`` locates the problem."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class ClusterState:
    """Brokers, replica lists, leaders and traffic: what scenarios change and units read.

    ``leaders`` is complete (one entry per partition, ``NO_LEADER`` where
    none); when the snapshot had none, each leader is the first replica, as
    with Kafka's preferred leaders.  ``traffic`` may lack topics.
    """

    brokers: tuple[tuple[int, str | None], ...]
    topics: Mapping[str, Replicas]
    leaders: Mapping[str, tuple[int, ...]]
    traffic: Mapping[str, tuple[float | None, ...]]

    def broker_racks(self) -> dict[int, str | None]:
        return dict(self.brokers)

    def racks(self) -> list[str]:
        """Racks holding at least one broker, sorted."""
        return sorted({r for _, r in self.brokers if r is not None})

    def restrict(self, topics: Iterable[str]) -> ClusterState:
        """Only these topics (those that exist); every broker stays, scenarios may need them."""
        names = sorted(t for t in set(topics) if t in self.topics)
        return ClusterState(
            brokers=self.brokers,
            topics={t: self.topics[t] for t in names},
            leaders={t: self.leaders[t] for t in names},
            traffic={t: self.traffic[t] for t in names if t in self.traffic},
        )

    def cluster_json(self) -> dict[str, Any]:
        """The contract's ``cluster`` object."""
        return {
            "brokers": [{"id": b, "rack": r} for b, r in self.brokers],
            "topics": {t: [list(r) for r in parts] for t, parts in sorted(self.topics.items())},
        }

    def to_json(self) -> dict[str, Any]:
        out = self.cluster_json()
        out["leaders"] = {t: list(v) for t, v in sorted(self.leaders.items())}
        out["traffic"] = {t: list(v) for t, v in sorted(self.traffic.items())}
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ClusterState:
        """Inverse of :meth:`to_json`, unchecked: for documents this module wrote (the job's own rows).

        Documents from outside go through :func:`parse_state`, which validates.
        """
        return cls(
            brokers=tuple((b["id"], b["rack"]) for b in doc["brokers"]),
            topics={t: tuple(map(tuple, parts)) for t, parts in doc["topics"].items()},
            leaders={t: tuple(v) for t, v in doc["leaders"].items()},
            traffic={t: tuple(v) for t, v in doc["traffic"].items()},
        )


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    cluster_id: str
    taken_at: str
    state: ClusterState
    #: registered groups and apps; each carries its effective ``fetch_mode``
    consumer_groups: tuple[dict[str, Any], ...]
    streams_apps: tuple[dict[str, Any], ...]
    fetch_mode: str = "nearest-replica"
    #: the operator's name for the cluster (settings ``cluster_name``): a label; ``cluster_id`` is the key
    cluster_name: str | None = None


# ---- parsing ------------------------------------------------------------------


def _int(v: Any, field: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise SnapshotError(field, f"expected an integer, got {type(v).__name__}")
    return v


def _obj(v: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(v, dict):
        raise SnapshotError(field, f"expected an object, got {type(v).__name__}")
    return v


def _arr(v: Any, field: str) -> list[Any]:
    if not isinstance(v, list):
        raise SnapshotError(field, f"expected an array, got {type(v).__name__}")
    return v


def parse_state(doc: Mapping[str, Any]) -> ClusterState:
    """``brokers``, ``topics`` and the optional ``leaders`` / ``traffic`` of a document."""
    brokers: dict[int, str | None] = {}
    for i, b in enumerate(_arr(doc.get("brokers"), "brokers")):
        b = _obj(b, f"brokers[{i}]")
        bid = _int(b.get("id"), f"brokers[{i}].id")
        rack = b.get("rack")
        if rack is not None and not isinstance(rack, str):
            raise SnapshotError(f"brokers[{i}].rack", "expected a string or null")
        if bid in brokers:
            raise SnapshotError(f"brokers[{i}].id", f"duplicate broker id {bid}")
        brokers[bid] = rack
    topics: dict[str, Replicas] = {}
    for name, parts in sorted(_obj(doc.get("topics"), "topics").items()):
        lists = []
        for p, replicas in enumerate(_arr(parts, f"topics.{name}")):
            ids = tuple(
                _int(r, f"topics.{name}[{p}][{k}]")
                for k, r in enumerate(_arr(replicas, f"topics.{name}[{p}]"))
            )
            for k, r in enumerate(ids):
                if r not in brokers:
                    raise SnapshotError(f"topics.{name}[{p}][{k}]", f"unknown broker id {r}")
            lists.append(ids)
        topics[name] = tuple(lists)
    leaders: dict[str, tuple[int, ...]] = {}
    raw_leaders = _obj(doc.get("leaders") or {}, "leaders")
    for name, parts in topics.items():
        if name in raw_leaders:
            ls = tuple(
                _int(v, f"leaders.{name}[{p}]")
                for p, v in enumerate(_arr(raw_leaders[name], f"leaders.{name}"))
            )
            if len(ls) != len(parts):
                raise SnapshotError(f"leaders.{name}", f"expected {len(parts)} leaders, got {len(ls)}")
            for p, v in enumerate(ls):
                if v != NO_LEADER and v not in brokers:
                    raise SnapshotError(f"leaders.{name}[{p}]", f"unknown broker id {v}")
            leaders[name] = ls
        else:
            leaders[name] = tuple(r[0] if r else NO_LEADER for r in parts)
    traffic: dict[str, tuple[float | None, ...]] = {}
    for name, rates in sorted(_obj(doc.get("traffic") or {}, "traffic").items()):
        if name not in topics:
            continue  # traffic of a topic the snapshot does not hold: nothing reads it here
        traffic[name] = per_partition(rates, len(topics[name]), f"traffic.{name}")
    return ClusterState(
        brokers=tuple(sorted(brokers.items())), topics=topics, leaders=leaders, traffic=traffic
    )


def per_partition(rates: Any, partitions: int, field: str) -> tuple[float | None, ...]:
    """A topic's bytes/s per partition: a list (null = unknown), or one total spread evenly."""
    if isinstance(rates, bool):
        raise SnapshotError(field, "expected a number or an array")
    top = math.nextafter(math.inf, 0)  # the largest float: no NaN, inf, nor an integer no float holds
    if isinstance(rates, int | float):
        if not 0 <= rates <= top:
            raise SnapshotError(field, "must be a finite number >= 0")
        return tuple(float(rates) / partitions for _ in range(partitions)) if partitions else ()
    out: list[float | None] = []
    for p, v in enumerate(_arr(rates, field)):
        if v is None:
            out.append(None)
        elif isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= top:
            raise SnapshotError(f"{field}[{p}]", "must be null or a finite number >= 0")
        else:
            out.append(float(v))
    if len(out) != partitions:
        raise SnapshotError(field, f"expected {partitions} partitions, got {len(out)}")
    return tuple(out)


def _entries(doc: Mapping[str, Any], key: str, id_key: str, default_mode: str) -> tuple[dict[str, Any], ...]:
    out = []
    seen: set[str] = set()
    for i, e in enumerate(_arr(doc.get(key) or [], key)):
        e = dict(_obj(e, f"{key}[{i}]"))
        name = e.get(id_key)
        if not isinstance(name, str):
            raise SnapshotError(f"{key}[{i}].{id_key}", "expected a string")
        if name in seen:
            raise SnapshotError(f"{key}[{i}].{id_key}", f"duplicate {name!r}")
        seen.add(name)
        mode = e.get("fetch_mode", default_mode)
        if mode not in FETCH_MODES:
            raise SnapshotError(f"{key}[{i}].fetch_mode", f"expected one of {', '.join(FETCH_MODES)}")
        e["fetch_mode"] = mode
        out.append(e)
    return tuple(sorted(out, key=lambda e: str(e[id_key])))


def parse_snapshot(doc: Any) -> FleetSnapshot:
    """A validated snapshot; raises :class:`SnapshotError` naming the field."""
    d = _obj(doc, "(document)")
    if d.get("schema") != SCHEMA:
        raise SnapshotError("schema", f"unsupported schema {d.get('schema')!r} (expected {SCHEMA})")
    cluster_id = d.get("cluster_id")
    if not isinstance(cluster_id, str) or not cluster_id:
        raise SnapshotError("cluster_id", "expected a non-empty string")
    taken_at = d.get("taken_at", "")
    if not isinstance(taken_at, str):
        raise SnapshotError("taken_at", "expected a string (RFC 3339)")
    mode = d.get("fetch_mode", "nearest-replica")
    if mode not in FETCH_MODES:
        raise SnapshotError("fetch_mode", f"expected one of {', '.join(FETCH_MODES)}")
    name = d.get("cluster_name")
    if name is not None and not isinstance(name, str):
        raise SnapshotError("cluster_name", "expected a string or null")
    return FleetSnapshot(
        cluster_id=cluster_id,
        taken_at=taken_at,
        state=parse_state(d),
        consumer_groups=_entries(d, "consumer_groups", "group_id", mode),
        streams_apps=_entries(d, "streams_apps", "application_id", mode),
        fetch_mode=mode,
        cluster_name=name or None,
    )


def snapshot_json(snap: FleetSnapshot) -> dict[str, Any]:
    """The document of a snapshot (inverse of :func:`parse_snapshot`)."""
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "kind": KIND,
        "cluster_id": snap.cluster_id,
        **({} if snap.cluster_name is None else {"cluster_name": snap.cluster_name}),
        "taken_at": snap.taken_at,
        "fetch_mode": snap.fetch_mode,
    }
    doc.update(snap.state.to_json())
    doc["consumer_groups"] = list(snap.consumer_groups)
    doc["streams_apps"] = list(snap.streams_apps)
    return doc


# ---- building from the agent's metadata -----------------------------------------


def utc_iso(now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))


class Planned(Protocol):
    """A group or app the agent plans (:class:`rackplan.agent.planning.planner.Registration` is one)."""

    @property
    def key(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def spec(self) -> Mapping[str, Any]: ...
    @property
    def fetch_mode(self) -> str: ...


@dataclass(frozen=True, slots=True)
class FileGroup:
    """A group or app of the settings file, as :class:`Planned`."""

    key: str
    kind: str
    spec: Mapping[str, Any]
    fetch_mode: str


def file_groups(settings: Settings) -> list[FileGroup]:
    """The settings file's groups and apps, each with its effective fetch mode."""
    out = [
        FileGroup(plan_key(CONSUMER, g["group_id"]), CONSUMER, g, settings.group_fetch_mode(g))
        for g in settings.consumer_groups
    ]
    out += [
        FileGroup(plan_key(STREAMS, a["application_id"]), STREAMS, a, settings.group_fetch_mode(a))
        for a in settings.streams_apps
    ]
    return out


def fleet_cluster_id(snapshot: Snapshot, settings: Settings) -> str:
    """The one id of a cluster in snapshots and archives: Kafka's cluster id; only when the brokers do not
    report one, ``cluster_name``, else the bootstrap servers (what archives used before, issue 28)."""
    return snapshot.cluster_id or settings.cluster_name or settings.kafka.bootstrap_servers


def build_snapshot(
    cluster_id: str,
    snapshot: Snapshot,
    racks: Mapping[int, str | None],
    settings: Settings,
    traffic: Mapping[str, Any] | None = None,
    specs: Mapping[str, dict[str, Any]] | None = None,
    regs: Sequence[Planned] | None = None,
) -> FleetSnapshot:
    """A fleet snapshot from the agent's metadata snapshot and its registrations.

    ``regs``: every group and app the agent plans (the settings file, the registrations topic and
    discovered members merged); without them, the settings file's alone.  ``traffic`` maps topics to
    bytes/s (a list per partition, or a topic total); ``specs`` may replace registrations by plan key
    (``consumer/<id>``, ``streams/<id>``), e.g. with the owners of the last published plans.
    ``settings.cluster_name`` is the snapshot's label.
    """
    state = ClusterState(
        brokers=tuple(sorted((b, racks.get(b)) for b in snapshot.replica_brokers.union(snapshot.brokers))),
        topics={t: snapshot.topics[t].replicas for t in sorted(snapshot.topics)},
        leaders={t: snapshot.topics[t].leaders for t in sorted(snapshot.topics)},
        traffic={
            t: per_partition(v, len(snapshot.topics[t].replicas), f"traffic.{t}")
            for t, v in sorted((traffic or {}).items())
            if t in snapshot.topics
        },
    )
    override = specs or {}
    groups: list[dict[str, Any]] = []
    apps: list[dict[str, Any]] = []
    for reg in file_groups(settings) if regs is None else regs:
        e = dict(override.get(reg.key, reg.spec))
        e["fetch_mode"] = reg.fetch_mode
        (groups if reg.kind == CONSUMER else apps).append(e)
    return FleetSnapshot(
        cluster_id=cluster_id,
        taken_at=utc_iso(snapshot.taken_at or time.time()),
        state=state,
        consumer_groups=tuple(sorted(groups, key=lambda e: str(e["group_id"]))),
        streams_apps=tuple(sorted(apps, key=lambda e: str(e["application_id"]))),
        fetch_mode=settings.fetch_mode,
        cluster_name=settings.cluster_name,
    )


# ---- traffic estimates ----------------------------------------------------------


def load_traffic(path: str | Path) -> dict[str, Any]:
    """A traffic file (JSON or YAML): topic -> bytes/s, a total or a list per partition.

    Typical source: the brokers' ``BytesInPerSec`` per topic, exported from JMX; read strictly, as the
    settings file is, and checked by :func:`per_partition` (:class:`SnapshotError` names file and topic).
    """
    from ..settings.errors import SettingsError
    from ..settings.yaml_file import read_yaml_mapping

    try:
        data = read_yaml_mapping(path)
    except SettingsError as e:  # one line per problem, each naming the file (and line)
        said = "; ".join(str(e).splitlines()).replace("settings file", "traffic file")
        raise SnapshotError("--traffic", said) from None
    for topic, rates in data.items():
        per_partition(rates, len(rates) if isinstance(rates, list) else 0, f"--traffic: {path}: {topic}")
    return {str(k): v for k, v in data.items()}


Offsets = dict[tuple[str, int], int]


def end_offsets(admin: Any, topics: Mapping[str, int], timeout_s: float) -> Offsets:
    """Log-end offset of every partition (``topics``: name -> partition count), via ListOffsets.

    :class:`SnapshotError` when a partition gave none (the agent's sampler,
    :mod:`rackplan.agent.traffic.sampler`, keeps the others instead).
    """
    from ..kafka.offsets import end_offsets as read_ends

    got = read_ends(admin, ((t, p) for t, n in topics.items() for p in range(n)), timeout_s)
    if got.failed:
        (t, p), name = min(got.failed.items())
        raise SnapshotError(f"{t}-{p}", f"no end offset ({name})")
    return dict(got.ends)


def rates_from_offsets(
    before: Offsets, after: Offsets, seconds: float, record_bytes: float, topics: Mapping[str, int]
) -> dict[str, list[float | None]]:
    """Bytes/s per partition: records appended per second times an average record size.

    A partition missing from either sample, or whose offset went backwards
    (recreated topic), is unknown (None).
    """
    if seconds <= 0:
        raise ValueError("the sampling interval must be positive")
    out: dict[str, list[float | None]] = {}
    for t, n in sorted(topics.items()):
        row: list[float | None] = []
        for p in range(n):
            a, b = before.get((t, p)), after.get((t, p))
            if a is None or b is None or b < a:
                row.append(None)
            else:
                row.append((b - a) / seconds * record_bytes)
        out[t] = row
    return out


# ---- writing --------------------------------------------------------------------

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def file_stem(cluster_id: str) -> str:
    """A file name for a cluster id (ids such as ``host:9092`` hold characters paths dislike)."""
    return _UNSAFE.sub("_", cluster_id).strip("._") or "cluster"


def dumps(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def write_snapshot(snap: FleetSnapshot, out: str | Path) -> Path:
    """Write the document to ``out``: a folder (one that exists, or any path ending in ``/``) gets
    ``<cluster_id>.json``; missing folders are created."""
    path = Path(out)
    if path.is_dir() or str(out).endswith("/"):
        path = path / f"{file_stem(snap.cluster_id)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(dumps(snapshot_json(snap)) + "\n", encoding="utf-8")
    tmp.replace(path)  # readers never see half a snapshot
    return path


def append_archive(snap: FleetSnapshot, directory: str | Path) -> Path:
    """Append the document as one line to ``<directory>/<cluster_id>.jsonl`` (history)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{file_stem(snap.cluster_id)}.jsonl"
    with path.open("a", encoding="utf-8") as f:
        f.write(dumps(snapshot_json(snap)) + "\n")
    return path


def read_documents(paths: Sequence[str | Path]) -> list[Any]:
    """Every document under ``paths`` (``*.json`` one each, ``*.jsonl`` one per line); small inputs only."""
    out: list[Any] = []
    for f in snapshot_files(paths):
        text = f.read_text(encoding="utf-8")
        if f.suffix == ".jsonl":
            out.extend(json.loads(line) for line in text.splitlines() if line.strip())
        else:
            out.append(json.loads(text))
    return out


def snapshot_files(paths: Sequence[str | Path]) -> list[Path]:
    """The snapshot files named by ``paths`` (files, or directories of ``*.json`` / ``*.jsonl``), sorted."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(f for f in p.iterdir() if f.suffix in (".json", ".jsonl") and f.is_file())
        elif p.is_file():
            files.append(p)
        else:
            raise FileNotFoundError(f"no such snapshot file or directory: {p}")
    return sorted(set(files))
