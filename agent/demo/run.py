"""``rackplan demo``: the agent against an embedded 3-rack cluster, end to end, in under a minute.

It creates topics, registers two consumer groups (one in the settings, one
by its members on the registrations topic) and one Streams app, starts a
local Alertmanager-style webhook receiver, lets the agent publish initial
plans (and alert on a group that is already cross-rack), decommissions a
broker (the mock reassigns replicas, changing rack sets), and prints what the
agent saw and did.

The terminal gets the story only: plain text, no colours or cursor tricks,
flushed section by section, so it reads the same in a terminal, a pipe or a
CI log.  The agent's own log (JSON lines, librdkafka's included) goes to a
file named at the start (``--log-file -`` sends it to stderr instead).
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import queue
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TextIO

from ..cluster.diff import change_title
from ..core.logging import configure, get_logger
from ..kafka.embedded import EmbeddedCluster
from ..kafka.publisher import Publisher
from ..kafka.topics import TopicSpec
from ..protocol.alerts import FIRING, UNFIXABLE_ALERTNAME
from ..protocol.registrations import REGISTRATION_SCHEMA, registration_key
from ..runtime.loop import Agent, CycleReport, topic_specs
from ..runtime.signals import install_stop_handlers
from ..settings.sections import Settings
from .options import DemoFailed, DemoSettings, check_poll_interval, deadline_s, ignored_variables, open_log
from .summary import Summary, alert_rows, plan_rows

DECOMMISSIONED_BROKER = 3  # in az-b
TOPICS = (("orders", 12, 2), ("payments", 6, 1), ("clicks", 6, 2), ("clicks-store-changelog", 6, 2))


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


def _streams_available() -> bool:
    """Until assignor/streams/ plans, the demo leaves Streams out."""
    from rackplan.assignor.model import Cluster, StreamsApp
    from rackplan.assignor.streams import plan_document

    try:
        plan_document(Cluster(broker_racks={}, topics={}), StreamsApp("probe", (), ()))
    except NotImplementedError:
        return False
    except Exception:
        return True
    return True


def audit_registrations() -> list[tuple[str, dict[str, Any]]]:
    """Group 'audit' registers itself: one record per member on the registrations topic."""
    now_ms = int(time.time() * 1000)
    out = []
    for r in "ac":
        member = f"audit-{r}"
        value = {
            "schema": REGISTRATION_SCHEMA,
            "group_id": "audit",
            "member_id": member,
            "rack": f"az-{r}",
            "topics": ["orders"],
            "assignor": "range",
            "timestamp_ms": now_ms,
        }
        out.append((registration_key("consumer", "audit", member), value))
    return out


def demo_settings(
    bootstrap: str,
    poll_interval_s: float,
    log_level: str,
    http_port: int = 0,
    webhook_url: str | None = None,
) -> tuple[Settings, list[str]]:
    """The demo's settings-file registrations; notes say what had to be left out."""
    notes: list[str] = []
    optimal = "rack-optimal" if _has_module("rackplan.assignor.consumer.rack_optimal") else "range"
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
            "Streams assignment not implemented yet (assignor/streams/): Streams app 'clicks' skipped"
        )
    settings = DemoSettings.model_validate(
        {
            "kafka": {"bootstrap_servers": bootstrap, "config": {}},
            "poll_interval_s": poll_interval_s,
            "consumer_groups": groups,
            "streams_apps": apps,
            "change_persist_polls": 2,
            "alerts": {
                "cross_rack_threshold": 0.25,
                "worsen_delta": 0.05,
                "cooldown_s": 0,
                "for_s": 0,
                "keep_firing_for_s": 0,
            },
            "webhook": {
                "url": webhook_url,
                "timeout_s": 2,
                "backoff_initial_s": 0.1,
                "backoff_max_s": 0.5,
                "labels": {"cluster": "demo"},
            },
            "metadata": {"request_timeout_s": 5, "backoff_initial_s": 0.2, "backoff_max_s": 1},
            "io_timeout_s": 10,
            "http": {"host": "127.0.0.1", "port": http_port},
            "log": {"format": "json", "level": log_level},
        }
    )
    return settings, notes


def create_demo_topics(cluster: EmbeddedCluster) -> None:
    for name, partitions, rf in TOPICS:
        cluster.create_topic(name, partitions, rf)


def topic_creator(cluster: EmbeddedCluster) -> Callable[[list[TopicSpec]], None]:
    """The mock has no CreateTopics: the agent's missing topics are created through the mock API."""

    def create(specs: list[TopicSpec]) -> None:
        for s in specs:
            cluster.create_topic(s.name, s.partitions, min(3, len(cluster.broker_racks)))

    return create


class WebhookReceiver:
    """A stand-in for Alertmanager: records every alert POSTed to ``/api/v2/alerts``."""

    def __init__(self) -> None:
        self.posts: list[list[dict[str, Any]]] = []
        #: (status when received: firing, resolved or unfixable; alert key) of every alert received
        self.received: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                ok = self.path == "/api/v2/alerts" and self.headers.get("Content-Type") == "application/json"
                if ok:
                    alerts = json.loads(body)
                    now = dt.datetime.now(dt.UTC)
                    with receiver._lock:
                        receiver.posts.append(alerts)
                        for a in alerts:
                            ends = dt.datetime.fromisoformat(a["endsAt"])
                            key = f"{a['labels']['kind']}/{a['labels']['group']}"
                            status = "resolved" if ends <= now else "firing"
                            if a["labels"].get("alertname") == UNFIXABLE_ALERTNAME:
                                status = "unfixable"  # a one-off report, not a page
                            receiver.received.append((status, key))
                self.send_response(200 if ok else 400)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name="demo-webhook", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/api/v2/alerts"

    def statuses(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self.received)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _wait(
    reports: queue.Queue[CycleReport],
    until: Callable[[CycleReport], bool],
    deadline: float,
    thread: threading.Thread,
) -> list[CycleReport]:
    seen: list[CycleReport] = []
    while time.monotonic() < deadline:
        if not thread.is_alive() and reports.empty():
            raise DemoFailed("the agent stopped unexpectedly; see the agent log named above")
        try:
            r = reports.get(timeout=0.2)
        except queue.Empty:
            continue
        seen.append(r)
        if until(r):
            return seen
    raise DemoFailed("the agent did not show the expected cycle in time; see the agent log named above")


def _register_audit(settings: Settings, cluster: EmbeddedCluster) -> None:
    """Publish the 'audit' members' own registrations, as their clients would."""
    specs = [t for t in topic_specs(settings) if t.name == settings.registrations_topic]
    topic_creator(cluster)(specs)
    publisher = Publisher(settings.kafka.client_config(), settings.plan_max_message_bytes)
    publisher.publish_many(
        settings.registrations_topic,
        [(k, json.dumps(v).encode()) for k, v in audit_registrations()],
        settings.io_timeout_s,
    )
    publisher.flush(settings.io_timeout_s)


#: topics of the operator's own ``agent run`` beside the demo's agent (the mock cannot create topics)
TRY_PREFIX = "_rackplan-try."
#: the agents' group of the operator's ``agent run`` (``ha.group_id``): not the demo agent's
TRY_GROUP = "rackplan-agents-try"


def write_try_settings(cluster: EmbeddedCluster, demo: Settings, path: str) -> Settings:
    """A settings file for ``rackplan agent run`` against the demo's cluster, its topics created.

    Its own topics (:data:`TRY_PREFIX`): on the demo's, the demo agent's heartbeat would make it
    refuse to start (another agent publishes there).  Its own agents' group (:data:`TRY_GROUP`): in
    the demo agent's, each agent's join rebalanced the other and the lease took 9 s to 30 s and more
    to arrive (CI: 2 of 4 runs).  HTTP on a free port, named in the file.
    """
    import socket

    import yaml

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    doc = {
        "kafka": {"bootstrap_servers": cluster.bootstrap_servers},
        "poll_interval_s": 2,
        "plan_topic": f"{TRY_PREFIX}plans",
        "alerts_topic": f"{TRY_PREFIX}alerts",
        "registrations_topic": f"{TRY_PREFIX}registrations",
        # its own group too: two deployments in one agents' group rebalance each other (every join
        # pauses the other's publishing) and a standby may wait for the lease for half a minute
        "ha": {"lease_topic": f"{TRY_PREFIX}lease", "group_id": TRY_GROUP},
        "traffic_topic": f"{TRY_PREFIX}traffic",
        "http": {"host": "127.0.0.1", "port": port},
        "consumer_groups": [dict(g) for g in demo.consumer_groups],
        "log": {"format": "console"},
    }
    settings = DemoSettings.model_validate(doc)  # as the demo's: not from the environment
    topic_creator(cluster)(topic_specs(settings))
    with open(path, "w", encoding="utf-8") as f:
        f.write("# rackplan demo: your own agent beside the demo's, on the same embedded cluster\n")
        yaml.safe_dump(doc, f, sort_keys=False)
    return settings


def try_it(s: Summary, bootstrap: str, base: str, config: str, plan_topic: str) -> None:
    """What to run against the demo's cluster: ``agent run``, kcat and curl (docs/agent.md)."""
    s.section("Try it: the cluster stays up")
    s.line(f"  bootstrap    {bootstrap}")
    s.line(f"  agent HTTP   {base}  (/metrics /v1/plans /v1/groups /readyz)")
    s.line(f"  plans        kcat -b {bootstrap.split(',')[0]} -C -t {plan_topic} -K '\\t' -e")
    s.line(f"  curl         curl -s {base}/v1/plans")
    s.line(f"  your agent   rackplan agent run --config {config}")
    s.line(
        f"               (its own topics {TRY_PREFIX}*, agents' group {TRY_GROUP}; its HTTP port is in the file)"
    )


def _header(s: Summary, cluster: EmbeddedCluster, settings: Settings, webhook: str, log_where: str) -> None:
    by_rack: dict[str, list[int]] = {}
    for b, r in sorted(cluster.broker_racks.items()):
        by_rack.setdefault(r, []).append(b)
    s.line("rackplan demo: the agent beside an embedded 3-rack Kafka cluster (librdkafka's mock)")
    s.line("  brokers      " + " | ".join(f"{r}: {' '.join(map(str, bs))}" for r, bs in by_rack.items()))
    s.line("  topics       " + ", ".join(f"{n} {p}x rf{rf}" for n, p, rf in TOPICS))
    s.line("  registered   consumer/payments and streams/clicks in the settings;")
    s.line(f"               consumer/audit by its 2 members on {settings.registrations_topic}")
    s.line(f"  webhook      Alertmanager API v2 stand-in at {webhook}")
    s.line(f"  agent log    {log_where} (JSON lines)")


def _keep_running(
    s: Summary, stack: ExitStack, cluster: EmbeddedCluster, settings: Settings, agent: Agent
) -> None:
    """The cluster and the agent stay up: what to try on them; Ctrl-C (or SIGTERM) stops the agent."""
    config = stack.enter_context(tempfile.TemporaryDirectory(prefix="rackplan-demo-")) + "/try.yaml"
    write_try_settings(cluster, settings, config)
    base = f"http://127.0.0.1:{agent.http.port}" if agent.http is not None else "(no HTTP)"
    try_it(s, cluster.bootstrap_servers, base, config, settings.plan_topic)
    s.line("Keeping the cluster and the agent running; Ctrl-C to stop.")
    install_stop_handlers(agent.stop)


def run_demo(
    poll_interval_s: float = 0.5,
    keep_running: bool = False,
    log_level: str = "info",
    out: TextIO | None = None,
    log_file: str | None = None,
) -> int:
    """The show; :class:`~.options.DemoOptionError` (before anything starts) for an option it cannot honour,
    :class:`~.options.DemoFailed` when the agent did not do what it shows."""
    check_poll_interval(poll_interval_s)
    s = Summary(out if out is not None else sys.stdout)
    deadline = time.monotonic() + deadline_s(poll_interval_s)
    with ExitStack() as stack:
        log_stream, log_where = open_log(log_file, stack)
        configure("json" if log_file != "-" else "auto", log_level, stream=log_stream)
        # Before the log file closes, whatever still logs goes back to stderr.
        stack.callback(configure, "json", "warning", sys.stderr)
        log = get_logger("rackplan.demo")
        cluster = stack.enter_context(EmbeddedCluster(brokers_per_rack=2, racks=3))
        create_demo_topics(cluster)
        receiver = WebhookReceiver()
        stack.callback(receiver.close)
        settings, notes = demo_settings(
            cluster.bootstrap_servers, poll_interval_s, log_level, webhook_url=receiver.url
        )
        if ignored_variables():
            notes.append(f"not read: {', '.join(ignored_variables())} (the demo's settings are its own)")
        for n in notes:
            log.warning("demo note", note=n)
        _register_audit(settings, cluster)
        _header(s, cluster, settings, receiver.url, log_where)
        for n in notes:
            s.wrapped(f"note         {n}", "  ")

        reports: queue.Queue[CycleReport] = queue.Queue()
        agent = Agent(
            settings,
            create_missing_topics=topic_creator(cluster),
            on_cycle=reports.put,
            serve_http=keep_running,
        )
        thread = threading.Thread(target=agent.run, name="rackplan-agent", daemon=True)
        thread.start()

        def stop_agent() -> None:
            agent.stop.set()
            thread.join(30)

        stack.callback(stop_agent)
        first = _wait(reports, lambda r: r.ok, deadline, thread)
        s.section(f"1. Initial plans (the agent polls every {poll_interval_s:g} s)")
        plan_rows(s, [p for r in first for p in r.published], with_before=False)
        s.line("  alerts on the initial state:")
        alert_rows(s, [a for r in first for a in r.alerts])

        s.section(
            f"2. Decommissioning broker {DECOMMISSIONED_BROKER} ({cluster.broker_racks[DECOMMISSIONED_BROKER]}):"
            " the mock moves its replicas to the other brokers"
        )
        cluster.decommission(DECOMMISSIONED_BROKER)
        t_change = time.monotonic()
        confirmed = _wait(reports, lambda r: r.confirmed, deadline, thread)[-1]
        assert confirmed.change is not None
        s.line(
            f"  change confirmed {time.monotonic() - t_change:.1f} s later, "
            f"after {settings.change_persist_polls} consecutive polls saw it:"
        )
        for kind, count in confirmed.change.counts().items():
            s.line(f"  {count:>5}  {change_title(kind)}")

        s.section("3. Republished plans (sticky to the previous plan)")
        if confirmed.published:
            plan_rows(s, confirmed.published, with_before=True)
        else:
            s.line("  (none: no registered group's rack sets changed)")

        alerts = list(confirmed.alerts)
        if any(a.status == FIRING for a in [*alerts, *agent.status().firing]):
            later = _wait(reports, lambda r: r.ok and bool(r.alerts), deadline, thread)
            alerts += [a for r in later for a in r.alerts]
        s.section("4. Locality alerts after the change")
        alert_rows(s, alerts)

        if agent.webhook is not None:
            agent.webhook.wait_idle(max(0.0, min(5.0, deadline - time.monotonic())))
        received = receiver.statuses()
        tally = {
            st: sum(1 for status, _ in received if status == st) for st in ("firing", "resolved", "unfixable")
        }
        s.section("5. Webhook (Alertmanager API v2)")
        s.line(
            f"  received {len(received)} alerts in {len(receiver.posts)} POSTs: "
            f"{tally['firing']} firing, {tally['resolved']} resolved, {tally['unfixable']} unfixable (sent once)"
        )

        s.line()
        s.line(
            f"Plans are on topic {settings.plan_topic}, alerts on {settings.alerts_topic}, "
            f"registrations on {settings.registrations_topic}."
        )
        if keep_running:
            _keep_running(s, stack, cluster, settings, agent)
            while thread.is_alive():
                thread.join(0.5)
    return 0
