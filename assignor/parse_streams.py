"""The ``streams_app`` part of a contract input: sub-topologies, clients, rack-aware options.

Split from :mod:`.parse` (which still answers ``parse_streams_app`` and reads the
whole document); the rules are the same: every rejection names its field.
"""

from __future__ import annotations

from collections.abc import Mapping

from .fields import (
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    InputError,
    absent_as,
    finite_sum,
    key_path,
    opt_int,
    read_bool,
    read_choice,
    read_int,
    read_key,
    read_list,
    read_obj,
    read_rack,
    read_required,
    read_str,
)
from .model import (
    RACK_STRATEGIES,
    STREAMS_ASSIGNORS,
    Cluster,
    RackAwareConfig,
    StreamsApp,
    StreamsClient,
    Subtopology,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (issue 29)

if TYPE_CHECKING:
    from typing import Any


def parse_streams_app(doc: object, cluster: Cluster) -> StreamsApp:
    a = read_obj(doc, "streams_app")
    app_id = read_str(read_required(a, "application_id", "streams_app"), "streams_app.application_id")
    subs, partitions = _subtopologies(a, cluster)
    clients = _clients(a)
    rack_aware = _rack_aware(a)
    tags_raw = absent_as(a.get("rack_aware_assignment_tags"), [])
    app = StreamsApp(
        application_id=app_id,
        subtopologies=tuple(subs),
        clients=tuple(clients),
        num_standby_replicas=opt_int(a, "num_standby_replicas", "streams_app", 0),
        acceptable_recovery_lag=opt_int(
            a, "acceptable_recovery_lag", "streams_app", 10_000, maximum=INT64_MAX
        ),
        max_warmup_replicas=opt_int(a, "max_warmup_replicas", "streams_app", 2, minimum=1),
        rack_aware_assignment_tags=tuple(
            read_str(t, f"streams_app.rack_aware_assignment_tags[{k}]")
            for k, t in enumerate(read_list(tags_raw, "streams_app.rack_aware_assignment_tags"))
        ),
        rack_aware=rack_aware,
        assignor=read_choice(
            a.get("assignor"), "streams_app.assignor", STREAMS_ASSIGNORS, "high-availability"
        ),
        partitions=partitions,
    )
    if cluster.traffic is not None:  # the stats' sums: a partition counts once per (task, partition) pair
        from .traffic import streams_counted_bytes

        for kind, total in zip(("active", "standby"), streams_counted_bytes(cluster, app), strict=True):
            what = f"the bytes/s of the app's {kind} (task, topic partition) pairs"
            finite_sum((total,), "cluster.traffic", what)
    return app


def _subtopologies(a: Mapping[str, Any], cluster: Cluster) -> tuple[list[Subtopology], dict[str, int]]:
    """The app's sub-topologies, and each one's partition count (its source topics must agree on it)."""
    subs: list[Subtopology] = []
    partitions: dict[str, int] = {}
    raw_subs = read_list(read_required(a, "subtopologies", "streams_app"), "streams_app.subtopologies")
    for i, s in enumerate(raw_subs):
        path = f"streams_app.subtopologies[{i}]"
        s = read_obj(s, path)
        sid = s.get("id")
        if isinstance(sid, int) and not isinstance(sid, bool):
            sid = str(sid)
        sid = read_str(sid if "id" in s else read_required(s, "id", path), f"{path}.id")
        if sid in partitions:
            raise InputError(f"{path}.id", f"duplicate sub-topology id {sid!r}")
        sources = []
        for k, t in enumerate(read_list(read_required(s, "source_topics", path), f"{path}.source_topics")):
            t = read_str(t, f"{path}.source_topics[{k}]")
            if t not in cluster.topics:
                raise InputError(f"{path}.source_topics[{k}]", f"unknown topic {t!r}")
            sources.append(t)
        if not sources:
            raise InputError(f"{path}.source_topics", "a sub-topology needs at least one source topic")
        counts = {len(cluster.topics[t]) for t in sources}
        if len(counts) > 1:
            detail = ", ".join(f"{t!r}={len(cluster.topics[t])}" for t in sources)
            raise InputError(
                f"{path}.source_topics", f"source topics must have equal partition counts ({detail})"
            )
        changelogs = tuple(
            read_str(t, f"{path}.changelog_topics[{k}]")
            for k, t in enumerate(read_list(s.get("changelog_topics", []), f"{path}.changelog_topics"))
        )
        stateful = read_bool(s.get("stateful", bool(changelogs)), f"{path}.stateful")
        partitions[sid] = counts.pop()
        subs.append(Subtopology(sid, tuple(sources), changelogs, stateful))

    return subs, partitions


def _clients(a: Mapping[str, Any]) -> list[StreamsClient]:
    clients: list[StreamsClient] = []
    seen: set[str] = set()
    for i, c in enumerate(read_list(read_required(a, "clients", "streams_app"), "streams_app.clients")):
        path = f"streams_app.clients[{i}]"
        c = read_obj(c, path)
        pid = read_str(read_required(c, "process_id", path), f"{path}.process_id")
        if pid in seen:
            raise InputError(f"{path}.process_id", f"duplicate process id {pid!r}")
        seen.add(pid)
        tags = {
            read_key(k, key_path(f"{path}.tags", k)): read_str(v, key_path(f"{path}.tags", k))
            for k, v in read_obj(absent_as(c.get("tags"), {}), f"{path}.tags").items()
        }
        lags = {
            read_key(k, key_path(f"{path}.task_lags", k)): read_int(
                v, key_path(f"{path}.task_lags", k), minimum=INT64_MIN, maximum=INT64_MAX
            )
            for k, v in read_obj(absent_as(c.get("task_lags"), {}), f"{path}.task_lags").items()
        }
        clients.append(
            StreamsClient(
                process_id=pid,
                rack=read_rack(c.get("rack"), f"{path}.rack"),
                threads=opt_int(c, "threads", path, 1, minimum=1),
                tags=tags,
                previous_active=_task_list(c.get("previous_active"), f"{path}.previous_active"),
                previous_standby=_task_list(c.get("previous_standby"), f"{path}.previous_standby"),
                task_lags=lags,
            )
        )

    return clients


def _rack_aware(a: Mapping[str, Any]) -> RackAwareConfig:
    """``rack_aware``: the strategy and its costs (None: Kafka's default for the assignor)."""
    ra_raw = read_obj(absent_as(a.get("rack_aware"), {}), "streams_app.rack_aware")
    return RackAwareConfig(
        strategy=read_choice(
            ra_raw.get("strategy"), "streams_app.rack_aware.strategy", RACK_STRATEGIES, "none"
        ),
        traffic_cost=None
        if ra_raw.get("traffic_cost") is None
        else read_int(
            ra_raw["traffic_cost"], "streams_app.rack_aware.traffic_cost", minimum=0, maximum=INT32_MAX
        ),
        non_overlap_cost=None
        if ra_raw.get("non_overlap_cost") is None
        else read_int(
            ra_raw["non_overlap_cost"],
            "streams_app.rack_aware.non_overlap_cost",
            minimum=0,
            maximum=INT32_MAX,
        ),
        sticky_to_previous=read_bool(
            ra_raw.get("sticky_to_previous", False), "streams_app.rack_aware.sticky_to_previous"
        ),
        weigh_by_traffic=read_bool(
            ra_raw.get("weigh_by_traffic", False), "streams_app.rack_aware.weigh_by_traffic"
        ),
    )


def _task_list(v: object, path: str) -> tuple[str, ...]:
    if v is None:
        return ()
    return tuple(read_str(t, f"{path}[{k}]") for k, t in enumerate(read_list(v, path)))
