"""``rackplan snapshot``, ``rackplan fleet`` and ``rackplan report``.

``snapshot`` needs a Kafka client (the agent's settings say where); ``fleet``
runs in process with the package alone, its Spark engine and ``report`` need
the ``spark`` extra, imported only when they run, so the parser builds on a
machine without it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from rackplan.agent.cluster.archive import FleetSnapshot, SnapshotError
from rackplan.agent.kafka.timeouts import admin_client_config, operation_timeout_s, result_timeout_s
from rackplan.agent.settings.errors import describe_error
from rackplan.agent.settings.sections import Settings

if TYPE_CHECKING:
    from rackplan.agent.planning.planner import Registration

EXIT_BAD_INPUT = 2
SPARK_EXTRA_HINT = "install the spark extra: pip install 'rackplan[spark]'"


def register(sub: Any) -> None:
    """Add the fleet subcommands to the ``rackplan`` parser."""
    snap = sub.add_parser(
        "snapshot", help="write a fleet snapshot of a cluster (JSON) from the agent's settings"
    )
    snap.add_argument("--config", required=True, help="the agent's settings YAML (Kafka, registrations)")
    snap.add_argument("--out", required=True, help="file or directory (<cluster_id>.json), or - for stdout")
    snap.add_argument(
        "--cluster-id",
        help="id of the cluster in the fleet (default: Kafka's cluster id; settings cluster_name is its label)",
    )
    snap.add_argument(
        "--traffic", help="bytes/s per topic (a number) or per partition (a list), JSON or YAML"
    )
    snap.add_argument(
        "--sample-seconds",
        type=float,
        default=0.0,
        help="estimate the traffic of other topics from log-end offsets sampled this many seconds apart",
    )
    snap.add_argument(
        "--record-bytes",
        type=float,
        default=1024.0,
        help="average record size for --sample-seconds (default 1024)",
    )
    snap.add_argument(
        "--with-plans",
        action="store_true",
        help="members own what the last plans on the plan topic gave them",
    )
    snap.add_argument("--archive", help="also append the snapshot to <dir>/<cluster_id>.jsonl (history)")
    snap.set_defaults(func=cmd_snapshot)

    fleet = sub.add_parser(
        "fleet",
        help="what-ifs over snapshots, in process or on Spark: Parquet tables of locality and cost",
    )
    from .job import add_arguments  # no Spark import at module level

    add_arguments(fleet)
    fleet.set_defaults(func=cmd_fleet)

    report = sub.add_parser("report", help="static HTML page with PNG plots from the fleet tables")
    report.add_argument("--in", dest="source", required=True, help="the --out directory of `rackplan fleet`")
    report.add_argument("--out", required=True, help="directory for index.html and its PNGs")
    report.set_defaults(func=cmd_report)


def _fail(message: str) -> int:
    print(f"rackplan: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


# ---- snapshot ----------------------------------------------------------------------


def kafka_cluster_id(admin: Any, timeout_s: float) -> str | None:
    try:
        desc = admin.describe_cluster(
            include_authorized_operations=False, request_timeout=operation_timeout_s(timeout_s)
        )
        cid = desc.result(timeout=result_timeout_s(timeout_s)).cluster_id
    except Exception:
        return None
    return str(cid) if cid else None


def last_plan_specs(
    settings: Settings, snapshot: Any, racks: dict[int, str | None], regs: Sequence[Registration]
) -> dict[str, dict[str, Any]]:
    """Registrations as the agent would plan them next: members own what their last plan gave them."""
    from rackplan.agent.core.logging import get_logger, with_kafka_logger
    from rackplan.agent.kafka.read_back import read_back
    from rackplan.agent.planning.planner import instance_document
    from rackplan.agent.state.plan_book import PlanBook

    book = PlanBook()
    log = get_logger("rackplan.snapshot")
    book.replay(
        read_back(
            with_kafka_logger(settings.kafka.client_config()), settings.plan_topic, settings.io_timeout_s, log
        )
    )
    out: dict[str, dict[str, Any]] = {}
    for reg in regs:
        last = book.latest(reg.key)
        if last is None:
            continue
        doc = instance_document(snapshot, racks, reg, last)
        out[reg.key] = doc["consumer_group" if reg.kind == "consumer" else "streams_app"]
    return out


def agent_topics(settings: Settings) -> frozenset[str]:
    """Every topic the agent itself writes: never part of a fleet snapshot (plans, alerts,
    registrations and the leader-election lease)."""
    return frozenset(
        {settings.plan_topic, settings.alerts_topic, settings.registrations_topic, settings.ha.lease_topic}
    )


def capture(
    settings: Settings,
    cluster_id: str | None = None,
    traffic_path: str | None = None,
    sample_seconds: float = 0.0,
    record_bytes: float = 1024.0,
    with_plans: bool = False,
) -> FleetSnapshot:
    """Read the cluster through the agent's metadata reader and build its fleet snapshot."""
    from confluent_kafka.admin import AdminClient

    from rackplan.agent.cluster.archive import (
        build_snapshot,
        end_offsets,
        fleet_cluster_id,
        load_traffic,
        rates_from_offsets,
    )
    from rackplan.agent.cluster.metadata import poll_snapshot
    from rackplan.agent.core.logging import with_kafka_logger

    config = with_kafka_logger(settings.kafka.client_config())
    admin = AdminClient(admin_client_config(config, settings.metadata.request_timeout_s))
    own = agent_topics(settings)
    snap = poll_snapshot(admin, settings.metadata, exclude=own)
    racks = snap.resolve_racks({})
    timeout = settings.metadata.request_timeout_s
    name = (
        cluster_id or snap.cluster_id or kafka_cluster_id(admin, timeout) or fleet_cluster_id(snap, settings)
    )
    regs = planned_groups(settings, config, admin)
    traffic: dict[str, Any] = load_traffic(traffic_path) if traffic_path else {}
    if sample_seconds > 0:
        counts = {t: len(s.replicas) for t, s in sorted(snap.topics.items()) if t not in traffic}
        before = end_offsets(admin, counts, timeout)
        start = time.monotonic()
        time.sleep(sample_seconds)
        after = end_offsets(admin, counts, timeout)
        traffic.update(rates_from_offsets(before, after, time.monotonic() - start, record_bytes, counts))
    specs = last_plan_specs(settings, snap, racks, regs) if with_plans else None
    return build_snapshot(name, snap, racks, settings, traffic, specs, regs)


def planned_groups(settings: Settings, config: dict[str, Any], admin: Any) -> list[Registration]:
    """Every group the agent plans: the settings file's and the registrations topic's (self-registered
    groups, the recommended path); the file's alone when that topic cannot be read (said on stderr)."""
    from confluent_kafka import KafkaException

    from rackplan.agent.groups.registered import read_registrations
    from rackplan.agent.kafka.exceptions import TopicReadError
    from rackplan.agent.planning.planner import registrations

    try:
        if (
            settings.registrations_topic
            not in admin.list_topics(timeout=settings.metadata.request_timeout_s).topics
        ):
            return registrations(settings)  # no registrations topic: no agent made one, nobody registered
        return read_registrations(settings, config, int(time.time() * 1000)).registrations
    except (TopicReadError, KafkaException) as e:
        print(
            f"rackplan: warning: registrations not read ({e}): the settings file's groups only",
            file=sys.stderr,
        )
        return registrations(settings)


def cmd_snapshot(args: argparse.Namespace) -> int:
    from rackplan.agent.cluster.archive import append_archive, dumps, snapshot_json, write_snapshot
    from rackplan.agent.cluster.metadata import MetadataError

    try:
        settings = Settings.load(args.config)
    except (OSError, ValueError, ValidationError) as e:
        return _fail(f"settings: {describe_error(e)}")
    try:
        snap = capture(
            settings, args.cluster_id, args.traffic, args.sample_seconds, args.record_bytes, args.with_plans
        )
    except (OSError, SnapshotError) as e:
        return _fail(str(e))
    except MetadataError as e:
        print(f"rackplan: cannot read the cluster: {e}", file=sys.stderr)
        return 1
    if args.out == "-":
        sys.stdout.write(dumps(snapshot_json(snap)) + "\n")
    else:
        print(f"snapshot of {snap.cluster_id} written to {write_snapshot(snap, args.out)}", file=sys.stderr)
    if args.archive:
        append_archive(snap, args.archive)
    return 0


# ---- fleet and report ------------------------------------------------------------------


def cmd_fleet(args: argparse.Namespace) -> int:
    try:  # both engines write the tables with pyarrow: the fleet extra's, not a plain install's
        import pyarrow  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        return _fail("rackplan fleet writes Parquet with pyarrow: pip install 'rackplan[fleet]' (or [spark])")
    from .job import run_from_args  # checks its input before it needs PySpark

    return run_from_args(args)


def cmd_report(args: argparse.Namespace) -> int:
    try:
        import matplotlib  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
        import pandas  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: F401
        import pyarrow  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: F401
    except ImportError as e:
        return _fail(f"`rackplan report` needs {e.name}: {SPARK_EXTRA_HINT}")
    from .report import ReportError, render

    try:
        page = render(Path(args.source), Path(args.out))
    except ReportError as e:
        return _fail(str(e))
    print(f"report written to {page}", file=sys.stderr)
    return 0
