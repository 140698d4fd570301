"""``rackplan demo``: the agent against an embedded 3-rack cluster, end to end, in under a minute.

It creates topics, registers two consumer groups and one Streams app, lets
the agent publish initial plans, decommissions a broker (the mock reassigns
replicas, changing rack sets), and prints what the agent saw and did.
"""

from __future__ import annotations

import importlib.util
import queue
import sys
import threading
import time
from typing import Any, TextIO

from .embedded import EmbeddedCluster
from .kafka_io import TopicSpec
from .logging import configure, get_logger
from .loop import Agent, CycleReport
from .plans import PlanRecord
from .settings import Settings

DECOMMISSIONED_BROKER = 3  # in az-b
DEADLINE_S = 50.0


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


def _streams_available() -> bool:
    """assignor/streams.py is being written elsewhere; until it plans, the demo leaves Streams out."""
    from assignor.model import Cluster, StreamsApp
    from assignor.streams import plan_document

    try:
        plan_document(Cluster(broker_racks={}, topics={}), StreamsApp("probe", (), ()))
    except NotImplementedError:
        return False
    except Exception:
        return True
    return True


def demo_settings(
    bootstrap: str, poll_interval_s: float, log_level: str, http_port: int = 0
) -> tuple[Settings, list[str]]:
    """The demo's registrations; notes say what had to be left out."""
    notes: list[str] = []
    optimal = "rack-optimal" if _has_module("assignor.rack_optimal") else "range"
    if optimal != "rack-optimal":
        notes.append("assignor rack-optimal not available yet: group 'payments' uses range")
    groups = [
        {
            "group_id": "payments",
            "assignor": optimal,
            "members": [
                {"member_id": f"pay-{r}", "rack": f"az-{r}", "topics": ["orders", "payments"]} for r in "abc"
            ],
        },
        {
            "group_id": "audit",
            "assignor": "range",
            "members": [{"member_id": f"audit-{r}", "rack": f"az-{r}", "topics": ["orders"]} for r in "ac"],
        },
    ]
    apps: list[dict[str, Any]] = []
    if _streams_available():
        apps.append(
            {
                "application_id": "clicks",
                "subtopologies": [
                    {"id": "0", "source_topics": ["clicks"], "changelog_topics": ["clicks-store-changelog"]}
                ],
                "clients": [{"process_id": f"clicks-{r}", "rack": f"az-{r}", "threads": 1} for r in "abc"],
                "rack_aware": {"strategy": "balance_subtopology"},
            }
        )
    else:
        notes.append(
            "Streams assignment not implemented yet (assignor/streams.py): Streams app 'clicks' skipped"
        )
    settings = Settings.model_validate(
        {
            "kafka": {"bootstrap_servers": bootstrap, "config": {}},
            "poll_interval_s": poll_interval_s,
            "consumer_groups": groups,
            "streams_apps": apps,
            "change_persist_polls": 2,
            "alerts": {"cross_rack_threshold": 0.25, "worsen_delta": 0.05, "cooldown_s": 0},
            "metadata": {"request_timeout_s": 5, "backoff_initial_s": 0.2, "backoff_max_s": 1},
            "io_timeout_s": 10,
            "http": {"host": "127.0.0.1", "port": http_port},
            "log": {"format": "auto", "level": log_level},
        }
    )
    return settings, notes


def create_demo_topics(cluster: EmbeddedCluster) -> None:
    cluster.create_topic("orders", 12, 2)
    cluster.create_topic("payments", 6, 1)
    cluster.create_topic("clicks", 6, 2)
    cluster.create_topic("clicks-store-changelog", 6, 2)


def topic_creator(cluster: EmbeddedCluster) -> Any:
    """The mock has no CreateTopics: the agent's missing topics are created through the mock API."""

    def create(specs: list[TopicSpec]) -> None:
        for s in specs:
            cluster.create_topic(s.name, s.partitions, min(3, len(cluster.broker_racks)))

    return create


def _fmt_plan(p: PlanRecord) -> str:
    before = p.locality_before
    b = "-" if before is None else f"{before.cross_rack}/{before.total} ({before.fraction:.0%})"
    a = p.locality_after
    return (
        f"  {p.key:<18} generation {p.generation:<2} moved {p.moved:<3} "
        f"cross-rack: previous plan now {b}, new plan {a.cross_rack}/{a.total} ({a.fraction:.0%})\n"
        f"  {'':<18} reason: {p.reason}"
    )


def _wait(
    reports: queue.Queue[CycleReport], until: Any, deadline: float, thread: threading.Thread
) -> list[CycleReport]:
    seen: list[CycleReport] = []
    while time.monotonic() < deadline:
        if not thread.is_alive() and reports.empty():
            raise RuntimeError("the agent stopped unexpectedly; see its log")
        try:
            r = reports.get(timeout=0.2)
        except queue.Empty:
            continue
        seen.append(r)
        if until(r):
            return seen
    raise TimeoutError("the demo did not see the expected agent cycle in time")


def run_demo(
    poll_interval_s: float = 0.5,
    keep_running: bool = False,
    log_level: str = "warning",
    out: TextIO | None = None,
) -> int:
    w = out if out is not None else sys.stdout
    configure("auto", log_level, stream=sys.stderr)
    log = get_logger("rackplan.demo")
    deadline = time.monotonic() + DEADLINE_S
    with EmbeddedCluster(brokers_per_rack=2, racks=3) as cluster:
        create_demo_topics(cluster)
        settings, notes = demo_settings(cluster.bootstrap_servers, poll_interval_s, log_level)
        for n in notes:
            log.warning("demo note", note=n)
        reports: queue.Queue[CycleReport] = queue.Queue()
        agent = Agent(
            settings,
            create_missing_topics=topic_creator(cluster),
            on_cycle=reports.put,
            serve_http=keep_running,
        )
        print(f"Embedded cluster: {cluster.bootstrap_servers}", file=w)
        print(
            "Brokers: " + ", ".join(f"{b}@{r}" for b, r in sorted(cluster.broker_racks.items())),
            file=w,
        )
        for n in notes:
            print(f"Note: {n}", file=w)
        thread = threading.Thread(target=agent.run, name="rackplan-agent", daemon=True)
        thread.start()
        try:
            first = _wait(reports, lambda r: r.ok, deadline, thread)
            initial = [p for r in first for p in r.published]
            print("\nInitial plans:", file=w)
            for p in initial:
                print(_fmt_plan(p), file=w)
            print(f"\nDecommissioning broker {DECOMMISSIONED_BROKER} ({cluster.broker_racks[3]}) ...", file=w)
            cluster.decommission(DECOMMISSIONED_BROKER)
            t_change = time.monotonic()
            confirmed = _wait(reports, lambda r: r.confirmed, deadline, thread)[-1]
            assert confirmed.change is not None
            print(
                f"\nChange confirmed {time.monotonic() - t_change:.1f}s later "
                f"(seen in {settings.change_persist_polls} consecutive polls, every {poll_interval_s}s):",
                file=w,
            )
            for kind, count in confirmed.change.counts().items():
                print(f"  {kind:<20} {count}", file=w)
            print(f"  {confirmed.change.reason(limit=6)}", file=w)
            print("\nRepublished plans:", file=w)
            for p in confirmed.published:
                print(_fmt_plan(p), file=w)
            if not confirmed.published:
                print("  (none: no registered group's rack sets changed)", file=w)
            alerts = list(confirmed.alerts)
            if any(a.status == "firing" for a in alerts):
                later = _wait(reports, lambda r: r.ok, deadline, thread)
                alerts += [a for r in later for a in r.alerts]
            print("\nLocality alerts:", file=w)
            for a in alerts:
                planned = "" if a.planned is None else f", new plan {a.planned:.0%}"
                print(
                    f"  {a.status.upper():<8} {a.key:<20} cross-rack {a.previous:.0%} -> {a.current:.0%}"
                    f"{planned} (threshold {a.threshold:.0%})",
                    file=w,
                )
            if not alerts:
                print("  (none)", file=w)
            print(f"\nPlans are on topic {settings.plan_topic}, alerts on {settings.alerts_topic}.", file=w)
            if keep_running:
                from .commands import install_stop_handlers

                if agent.http is not None:
                    base = f"http://127.0.0.1:{agent.http.port}"
                    print(f"HTTP: {base}/metrics {base}/v1/plans {base}/v1/groups {base}/readyz", file=w)
                print("Keeping the agent running; Ctrl-C to stop.", file=w)
                install_stop_handlers(agent.stop)
                while thread.is_alive():
                    thread.join(0.5)
        finally:
            agent.stop.set()
            thread.join(30)
    return 0
