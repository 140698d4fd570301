"""``rackplan snapshot``, ``rackplan fleet`` and ``rackplan report``.

``snapshot`` needs a Kafka client (the agent's settings say where); ``fleet``
runs in process with the package alone, its Spark engine and ``report`` need
the ``spark`` extra, imported only when they run, so the parser builds on a
machine without it.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from rackplan.agent.cluster.archive import FleetSnapshot, SnapshotError
from rackplan.agent.kafka.timeouts import admin_client_config, operation_timeout_s, result_timeout_s
from rackplan.agent.settings.errors import describe_error
from rackplan.agent.settings.sections import Settings
from rackplan.assignor.fields import one_line

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
    snap.add_argument(
        "--out",
        required=True,
        help="file, or folder (an existing one or a path ending in /: <cluster_id>.json), or - for stdout",
    )
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
    report.add_argument(
        "--in", dest="source", required=True, help="the --out folder or URI of `rackplan fleet`"
    )
    report.add_argument("--out", required=True, help="folder or URI for index.html and its PNGs")
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

    traffic: dict[str, Any] = load_traffic(traffic_path) if traffic_path else {}  # a bad file: before Kafka
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
    if sample_seconds > 0:
        counts = {t: len(s.replicas) for t, s in sorted(snap.topics.items()) if t not in traffic}
        before = end_offsets(admin, counts, timeout)
        start = time.monotonic()
        time.sleep(sample_seconds)
        after = end_offsets(admin, counts, timeout)
        traffic.update(rates_from_offsets(before, after, time.monotonic() - start, record_bytes, counts))
    specs = last_plan_specs(settings, snap, racks, regs) if with_plans else None
    try:
        return build_snapshot(name, snap, racks, settings, traffic, specs, regs)
    except SnapshotError as e:  # a list of the file whose length is not its topic's (sampled lists fit)
        if not traffic_path or not e.field.startswith("traffic."):
            raise
        raise SnapshotError(
            f"--traffic: {traffic_path}: {e.field.removeprefix('traffic.')}", e.message
        ) from None


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


#: ``--sample-seconds`` at most a day (``time.sleep`` refuses far larger; 0: no sampling)
MAX_SAMPLE_SECONDS = 86_400.0
#: ``--record-bytes`` at most Kafka's largest record (its size is a 32-bit integer)
MAX_RECORD_BYTES = float(2**31 - 1)


def _not_a_folder(option: str, given: str, folder: bool) -> str | None:
    """Why ``given`` cannot be written, as far as can be told before any work (None: it can): a file
    where a folder is (``folder``: ``given`` itself is one; its missing folders would be created)."""
    path = Path(given)
    if folder and path.exists() and not path.is_dir():
        return f"{option} {given}: a file, not a folder"
    parent = next((p for p in path.parents if p.exists()), Path("."))
    return None if parent.is_dir() else f"{option} {given}: {parent} is a file, not a folder"


def snapshot_option_problem(args: argparse.Namespace) -> str | None:
    """The first option of ``rackplan snapshot`` that cannot work (one line naming it), None if none."""
    seconds, size = args.sample_seconds, args.record_bytes
    if not (math.isfinite(seconds) and 0 <= seconds <= MAX_SAMPLE_SECONDS):
        return (
            f"--sample-seconds: must be 0 (no sampling) to {MAX_SAMPLE_SECONDS:,.0f} seconds, got {seconds}"
        )
    if not (math.isfinite(size) and 0 < size <= MAX_RECORD_BYTES):
        return f"--record-bytes: must be above 0 and at most {MAX_RECORD_BYTES:,.0f} bytes, got {size}"
    if args.out != "-" and (problem := _not_a_folder("--out", args.out, args.out.endswith("/"))):
        return problem
    return _not_a_folder("--archive", args.archive, True) if args.archive else None


def cmd_snapshot(args: argparse.Namespace) -> int:
    from rackplan.agent.cluster.archive import append_archive, dumps, snapshot_json, write_snapshot
    from rackplan.agent.cluster.metadata import MetadataError

    problem = snapshot_option_problem(args)
    if problem is not None:
        return _fail(problem)
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
        try:
            path = write_snapshot(snap, args.out)
        except OSError as e:
            return _fail(f"--out {args.out}: cannot write: {e.strerror or e}")
        print(f"snapshot of {snap.cluster_id} written to {path}", file=sys.stderr)
    if args.archive:
        try:
            append_archive(snap, args.archive)
        except OSError as e:
            return _fail(f"--archive {args.archive}: cannot append: {e.strerror or e}")
    return 0


# ---- fleet and report ------------------------------------------------------------------


def cmd_fleet(args: argparse.Namespace) -> int:
    try:  # both engines write the tables with pyarrow: the fleet extra's, not a plain install's
        import pyarrow  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        return _fail("rackplan fleet writes Parquet with pyarrow: pip install 'rackplan[fleet]' (or [spark])")
    from .job import run_from_args  # checks its input before it needs PySpark

    return run_from_args(args)


def publish(site: Path, out: str) -> str:
    """Copy the page (``index.html`` and its PNGs) from the local folder ``site`` to ``out``, a URI
    pyarrow's file systems write (``s3://``, ``gs://``...); returns the page's URI."""
    from .storage import filesystem

    fs, root = filesystem(out)
    fs.create_dir(root, recursive=True)
    for f in sorted(site.iterdir()):
        with fs.open_output_stream(f"{root.rstrip('/')}/{f.name}") as stream:
            stream.write(f.read_bytes())
    return f"{out.rstrip('/')}/index.html"


def cmd_report(args: argparse.Namespace) -> int:
    try:
        import matplotlib  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
        import pandas  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: F401
        import pyarrow  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: F401
    except ImportError as e:
        return _fail(f"`rackplan report` needs {e.name}: {SPARK_EXTRA_HINT}")
    from .report import ReportError, render
    from .storage import local_path

    local = local_path(args.out)  # a path or file:// URI; another URI: the page is built aside, then copied
    try:
        if local is not None:
            page = str(render(args.source, Path(local)))
        else:
            with tempfile.TemporaryDirectory(prefix="rackplan-report-") as site:
                render(args.source, Path(site))
                page = publish(Path(site), args.out)
    except ReportError as e:
        return _fail(str(e))
    except OSError as e:  # the tables were read (ReportError otherwise): the page could not be written
        return _fail(f"--out {args.out}: cannot write the page: {one_line(str(e.strerror or e))}")
    print(f"report written to {page}", file=sys.stderr)
    return 0
