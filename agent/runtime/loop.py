"""The agent's lifecycle: start, run cycles until stopped, stop.

:meth:`Agent.run` reaches the brokers, then either serves one term (no lease)
or, with ``ha.enabled``, stands by until the lease is ours, leads a term until
it is lost, and again.  A term is :meth:`Agent.start` (topics, plan replay,
registrations, producer) then cycles (:func:`rackplan.agent.cycle.run.run_cycle`:
snapshot -> diff -> plan -> publish -> alert) every ``poll_interval_s``;
between cycles pending handovers are served.  Each cycle ends by publishing an
immutable :class:`~.status.StatusView` (one reference swapped) that the HTTP
server reads.  While a term is served the leader's heartbeat goes out on its
own thread (:mod:`rackplan.agent.ha.heartbeat`), so a slow cycle never delays it.  ``stop`` (set by SIGTERM/SIGINT) ends the loop after the current
cycle, and :meth:`Agent.close` flushes the producer and the webhook queue.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from ..alerts.webhook import Post, WebhookNotifier, default_agent_url, with_cluster_label
from ..core.errors import CannotRun
from ..core.logging import get_logger
from ..core.ports import AdminPort, Clock, Logger, PlanPublisher
from ..cycle.cycle_metrics import follower_metrics, term_metrics
from ..cycle.intake import Intake
from ..cycle.publishing import advance_handovers
from ..cycle.run import CycleIO, SnapshotSource, run_cycle
from ..cycle.status import StatusView, build_status, with_role
from ..cycle.traffic_feed import traffic_feed
from ..cycle.traffic_step import traffic_checks
from ..ha.heartbeat import Heartbeats
from ..ha.leader_watch import LeaderWatch
from ..ha.lease import Lease, LeaseLost, default_agent_id
from ..ha.rejoin import lease_rejoin_after_s, rejoin_if_orphaned
from ..ha.shared_group import warn_if_shared
from ..kafka.exceptions import ProducerFenced
from ..kafka.isolated_admin import IsolatedGroupsAdmin, isolated_admin
from ..kafka.read_back import read_back
from ..kafka.tail import TopicTail
from ..kafka.timeouts import admin_client_config
from ..kafka.topics import TopicSpec
from ..metrics import declared as metric
from ..metrics.registry import Metrics
from ..planning.planner import registrations
from ..protocol.plans import PlanRecord
from ..settings.sections import Settings
from ..state.term import CycleReport, Term, Wiring
from .http import AgentHttpServer
from .observe import publisher_for, shown
from .preflight import http_bind_error, reach_brokers
from .startup import continue_epoch, make_publisher, prepare_topics, replay, topic_specs
from .startup_retry import Backoff, StartupStopped, retry_startup
from .watch import plan_skipped, watch_lease, watch_plans

__all__ = ["Agent", "CycleReport", "topic_specs"]

T = TypeVar("T")

#: while standing by, how often the agent says it still waits for the lease
STANDBY_NOTE_S = 10.0


class Agent:
    """One agent: its clients, its current term, its lifecycle."""

    def __init__(
        self,
        settings: Settings,
        *,
        create_missing_topics: Callable[[list[TopicSpec]], None] | None = None,
        clock: Clock = time.time,
        on_cycle: Callable[[CycleReport], None] | None = None,
        serve_http: bool = False,
        admin: AdminPort | None = None,
        publisher: PlanPublisher | None = None,
        webhook_post: Post | None = None,
    ) -> None:
        """``create_missing_topics`` creates topics the brokers would not (the embedded cluster).

        ``serve_http``: run the HTTP server of ``settings.http`` while :meth:`run` runs.
        ``admin``, ``publisher`` and ``webhook_post`` replace the real clients (benchmarks, tests:
        :mod:`rackplan.agent.testing`).
        """
        self.settings = s = settings
        self.log: Logger = get_logger("rackplan.agent")
        self.client_config = s.kafka.client_config()
        #: a real client: bootstrap host names are resolved before the first contact (not for replacements)
        self._real_admin = admin is None
        if admin is None:  # DescribeGroups in a child process: librdkafka#4605 aborts it, not the agent
            admin = isolated_admin(
                admin_client_config(self.client_config, s.metadata.request_timeout_s),
                self.log,
                log_format=s.log.format,
                log_level=s.log.level,
            )
        self.admin: AdminPort = admin
        self.create_missing_topics = create_missing_topics
        self.clock = clock
        self.on_cycle = on_cycle
        self.stop = threading.Event()
        self.metrics = Metrics(cluster=s.cluster_name)
        self.agent_id = s.ha.agent_id or default_agent_id()
        self.w = Wiring(s, self.log, self.metrics, clock, self.stop, self.agent_id)
        self.observing = s.mode == "observe"  # plans computed and served, no record written (.observe)
        self.w.publisher = publisher_for(s, self.metrics, publisher)
        self.w.guard = self._guard
        self._own_publisher = publisher is None and not self.observing
        self.file_regs = registrations(s)
        self.intake = Intake(self.w, admin)
        #: the agent's own topics are not watched: its writes move their leaders and offsets
        own = frozenset(t.name for t in topic_specs(s))
        self.io = CycleIO(SnapshotSource(self.w, admin, own), self.intake, *traffic_checks(self.w, admin))
        self._webhook_post = webhook_post
        #: the lease and plan topics, read each cycle for records of others (see rackplan.agent.runtime.watch)
        self.lease_tail: TopicTail | None = None
        self.plan_tail: TopicTail | None = None
        self.heartbeats = Heartbeats(self.w)
        self.lease: Lease | None = None  # with settings.ha.enabled; None: this agent always leads
        self.leader_watch: LeaderWatch | None = None  # while standing by: who leads (ha/leader_watch.py)
        self.leader = not s.ha.enabled or self.observing  # an observer runs for no lease
        self.metrics.set(metric.LEADER, 1 if self.leader and not self.observing else 0)
        self._new_term()
        self.metrics.set_function(metric.SNAPSHOT_AGE_SECONDS, self._snapshot_age)
        self.serve_http = serve_http
        self.http: AgentHttpServer | None = None

    def _snapshot_age(self) -> float | None:
        last = self.term.last_good
        return None if last is None else max(0.0, self.clock() - last.taken_at)

    # ---- the view others read -----------------------------------------------------

    def status(self) -> StatusView:
        """The view published at the end of the last cycle: immutable, safe from any thread."""
        return with_role(self._status, self.w, self.leader, self.leader_watch)

    def _publish_status(self) -> None:
        self._status = shown(build_status(self.term), self.observing)  # one reference swapped: one whole view

    # ---- what tests and tools on the loop's thread inspect -------------------------

    @property
    def publisher(self) -> PlanPublisher | None:
        return self.w.publisher

    @publisher.setter
    def publisher(self, publisher: PlanPublisher | None) -> None:
        self.w.publisher = publisher

    @property
    def epoch(self) -> int:
        return self.w.epoch

    @property
    def webhook(self) -> WebhookNotifier | None:
        return self.io.webhook

    @property
    def ready(self) -> bool:
        return self.term.ready

    # ---- a term --------------------------------------------------------------------

    def _new_term(self, previous: Term | None = None) -> None:
        """A term learns all afresh from the topics and cluster, but keeps ``previous``' unfixable reports."""
        self.intake.close()
        self.term = Term(self.settings, self.file_regs, previous)
        term_metrics(self.metrics)
        self._publish_status()

    def _end_term(self) -> None:
        """Close the term's readers (registrations, plan and lease tails) when its leadership ends: each is
        a librdkafka client with a thread per broker, left connected for as long as this agent stood by."""
        self.intake.close()
        for tail in (self.plan_tail, self.lease_tail):
            if tail is not None:
                tail.close()
        self.plan_tail = self.lease_tail = None

    def start(self) -> None:
        """Topics, plan replay, registrations replay, producer; then :meth:`begin`."""
        s, w = self.settings, self.w
        names = self._startup_step(
            "agent topics", lambda: prepare_topics(w, self.admin, self.create_missing_topics)
        )
        self.heartbeats.topic_ok = not self.observing and s.ha.lease_topic not in names
        self.io.alerts_topic_ok = s.alerts_topic not in names
        self.io.traffic_topic_ok = s.traffic_topic not in names
        records = self._startup_step(
            "plan topic replay",
            lambda: read_back(
                self.client_config,
                s.plan_topic,
                s.io_timeout_s,
                self.log,
                lambda r: plan_skipped(w, r),
                w.secret,
            ),
        )
        # From here on the plan topic is watched for records this agent did not write (see watch.watch_plans).
        self.plan_tail = self._startup_step("plan topic tail", self._open_plan_tail)
        if s.registrations_topic in names:
            self.log.warning(
                "no registrations topic: registrations come from the settings file only",
                topic=s.registrations_topic,
            )
        else:
            self._startup_step("registrations topic replay", self._open_intake)
        if w.publisher is None or self._own_publisher:  # a new one each term: see make_publisher
            w.publisher = make_publisher(
                w, self.client_config, embedded=self.create_missing_topics is not None
            )
        if self.heartbeats.topic_ok:
            w.epoch, self.lease_tail = self._startup_step(
                "lease topic (epoch, foreign writers)", lambda: continue_epoch(w, self.client_config)
            )
        if self.lease is not None:  # other deployments' agents in our group: said once per term
            warn_if_shared(w, self.admin)
        self.begin(records)

    def _startup_step(self, what: str, step: Callable[[], T]) -> T:
        """One start-up step, asked again while its errors clear by themselves (:mod:`.startup_retry`)."""
        s = self.settings
        backoff = Backoff(s.metadata.backoff_initial_s, s.metadata.backoff_max_s, s.kafka.startup_retry_s)
        self.log.info("start-up step", step=what)
        return retry_startup(step, what, backoff, self.log, self.stop, check=self._still_leading)

    def _still_leading(self) -> None:
        """Between start-up attempts, with a lease: :class:`LeaseLost` once it moved to another agent."""
        if self.lease is not None and not self.lease.poll():
            raise LeaseLost("the lease partition was revoked during start-up")

    def _open_plan_tail(self) -> TopicTail:
        tail = TopicTail(self.client_config, self.settings.plan_topic, self.settings.io_timeout_s)
        try:
            tail.read_available(self.settings.io_timeout_s)
        except BaseException:
            tail.close()
            raise
        return tail

    def _open_intake(self) -> None:
        self.intake.close()  # a failed attempt's tail, if any
        self.intake.open(self.client_config, self.term)

    def begin(self, plan_records: list[tuple[str, PlanRecord | None]]) -> None:
        """Start-up after the Kafka part (see :func:`rackplan.agent.runtime.startup.replay`), with the webhook.

        :meth:`start` calls it; benchmarks and tests with fake clients call it directly.
        """
        s = self.settings
        if s.webhook.url is not None and self.io.webhook is None:
            self.io.webhook = WebhookNotifier(
                with_cluster_label(s.webhook, s.cluster_name),
                self.metrics,
                get_logger("rackplan.webhook"),
                firing_ttl_s=4 * max(s.webhook.resend_interval_s, s.poll_interval_s),
                post=self._webhook_post,
                agent_url=default_agent_url(s.http),
                clock=self.clock,
            )
        replay(self.w, self.term, self.intake, plan_records)
        self.io.traffic_feed = traffic_feed(self.w, self.io.traffic) if self.io.traffic_topic_ok else None
        self._publish_status()

    def run_once(self) -> CycleReport:
        """One cycle, with the checks of others' records before it (heartbeats have their own schedule)."""
        t0 = time.monotonic()
        term = self.term
        completed, term.completed = term.completed, []
        watch_lease(self.w, self.lease_tail, self.lease is not None)
        watch_plans(self.w, term, self.plan_tail)
        self._serve_logs()
        self.io.plans_watched = self.plan_tail is not None
        report = run_cycle(self.w, term, self.io)
        report.completed = completed + report.completed
        follower_metrics(self.metrics, term)
        report.duration_s = time.monotonic() - t0
        m = self.metrics
        m.inc(metric.POLLS_TOTAL, {"result": "ok" if report.ok else "failed"})
        m.observe(metric.CYCLE_DURATION_SECONDS, report.duration_s)
        if term.tombstoned_at_start:
            report.tombstoned = term.tombstoned_at_start + report.tombstoned
            term.tombstoned_at_start = []
        if report.ok and term.replayed and not term.ready:
            term.ready = True
            m.set(metric.READY, 1)
            self.log.info("ready", registrations=len(term.regs), plans=len(term.book.live_keys()))
        self._publish_status()
        if self.on_cycle is not None:
            self.on_cycle(report)
        return report

    def serve_handovers(self) -> None:
        """Between cycles, while handovers are pending: new release confirmations, completed handovers."""
        if self.intake.tail is not None and self.term.reg_synced:
            self.intake.apply_records(self.term, 0.0)
        self.term.completed += advance_handovers(self.w, self.term)
        self._publish_status()

    def _serve_logs(self) -> None:
        """librdkafka's log lines of the admin client and producer arrive through their poll calls."""
        poll = getattr(self.admin, "poll", None)
        if callable(poll):
            poll(0)
        if self.w.publisher is not None:
            self.w.publisher.poll()

    # ---- leadership ----------------------------------------------------------------

    def _guard(self) -> None:
        """Before publishing: with a lease, prove it is still held (:class:`LeaseLost` otherwise)."""
        if self.lease is not None:
            self.lease.confirm(min(self.settings.io_timeout_s, self.settings.ha.session_timeout_s))

    def _set_leader(self, leader: bool) -> None:
        self.leader = leader
        self.metrics.set(metric.LEADER, 1 if leader else 0)
        if leader:
            self.metrics.inc(metric.LEASE_ACQUISITIONS_TOTAL)

    def _fenced(self, e: ProducerFenced) -> None:
        """A newer agent's producer fenced ours: nothing of ours lands any more; a new term needs a new producer."""
        self.metrics.inc(metric.PUBLISHER_FENCED_TOTAL)
        self.log.error(
            "plan producer fenced: another agent publishes now; this agent stops publishing", error=str(e)
        )
        if self._own_publisher and self.w.publisher is not None:
            self.w.publisher.flush(min(1.0, self.settings.io_timeout_s))
            self.w.publisher = None

    # ---- running -------------------------------------------------------------------

    def run(self) -> int:
        """Run until :attr:`stop` is set; returns the process exit code."""
        try:
            if self.serve_http:
                host, port = self.settings.http.host, self.settings.http.port
                try:
                    self.http = AgentHttpServer(self.status, self.metrics, host, port)
                except OSError as e:  # a busy port, an address not of this machine: the settings' to fix
                    raise CannotRun(http_bind_error(e, host, port)) from None
                self.http.start()
                self.log.info("http serving", host=host, port=self.http.port)
            self._first_contact()
            if self.settings.ha.enabled and not self.observing:
                self._run_ha()
            else:
                try:
                    self.start()
                    self._serve_term()
                except ProducerFenced as e:  # without a lease there is nothing to stand by for
                    self._fenced(e)
                    raise CannotRun(f"{e}; this agent stopped publishing and exits") from None
        except StartupStopped as e:
            self.log.info("stopped during start-up", reason=str(e))
        finally:
            self.close()
        return 0

    def _first_contact(self) -> None:
        """Reach the bootstrap servers within ``kafka.startup_timeout_s``, else :class:`CannotRun` naming
        them: a wrong address must not look like an outage.  Later outages are retried."""
        s = self.settings
        problem = reach_brokers(
            lambda timeout: self.admin.list_topics(timeout=timeout),
            s.kafka.bootstrap_servers,
            s.kafka.startup_timeout_s,
            min(s.metadata.request_timeout_s, max(1.0, s.kafka.startup_timeout_s / 3)),
            s.metadata.backoff_initial_s,
            check_names=self._real_admin,
            stopped=self.stop.is_set,
        )
        if problem is not None:
            raise CannotRun(problem)

    def _serve_term(self) -> None:
        """Cycles until :attr:`stop` is set (or, with a lease, until it is lost: :class:`LeaseLost`).

        Heartbeats go out meanwhile on their own schedule, from the first cycle to the term's end.
        """
        self.heartbeats.start(lambda: self.term.replayed)
        try:
            while not self.stop.is_set():
                t0 = time.monotonic()
                try:
                    with self.heartbeats.cycle():
                        self.run_once()
                except (LeaseLost, CannotRun, ProducerFenced):
                    raise
                except Exception as e:  # keep serving; the next cycle starts from the last good state
                    self.log.error("cycle failed", error=repr(e), exc_info=True)
                self._wait_until(t0 + self.settings.poll_interval_s)
        finally:
            self.heartbeats.stop(self.settings.io_timeout_s + 1.0)

    def _wait_until(self, deadline: float) -> None:
        """Sleep until the next cycle, serving the lease and pending handovers meanwhile."""
        step = self.settings.followers.check_interval_s
        while not self.stop.is_set():
            # Before the deadline: slow cycles leave no time, and a lease lost then regained must still end
            # the term, or it leads with no heartbeat (docs/agent.md, step 10).
            if self.heartbeats.lost is not None:
                raise LeaseLost(self.heartbeats.lost)
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self.lease is not None and not self.lease.poll():
                raise LeaseLost("the lease partition was revoked")
            handovers = self.term.handover_count() > 0
            if handovers:
                try:
                    self.serve_handovers()
                except (LeaseLost, ProducerFenced):
                    raise
                except Exception as e:
                    self.log.error("handover check failed", error=repr(e), exc_info=True)
            idle = self.lease is None and not handovers
            self.stop.wait(left if idle else min(left, step if handovers else 0.2))

    def _run_ha(self) -> None:
        """Standby until the lease is ours, lead until it is lost or we stop, and again."""
        s = self.settings
        self._startup_step(
            "agent topics", lambda: prepare_topics(self.w, self.admin, self.create_missing_topics)
        )
        self.lease = Lease(self.client_config, s.ha, self.agent_id, self.log)
        self.leader_watch = watch = LeaderWatch.for_agent(self.w, self.client_config)
        try:
            while not self.stop.is_set():
                self.log.info("standby: waiting for the lease", agent_id=self.agent_id, group=s.ha.group_id)
                confirm_s = min(s.io_timeout_s, s.ha.session_timeout_s)
                since = time.monotonic()
                note_at = since + STANDBY_NOTE_S
                rejoin_at = since + lease_rejoin_after_s(s.ha.session_timeout_s)
                while not self.stop.is_set() and not self.lease.acquire(confirm_s):
                    watch.refresh()
                    if time.monotonic() >= note_at:
                        note_at += STANDBY_NOTE_S
                        # What it waits for: the group's coordinator to assign the lease partition (another
                        # agent holds it, or the coordinator is still loading: librdkafka keeps asking).
                        self.log.info(
                            "standby: still waiting for the lease partition to be assigned",
                            group=s.ha.group_id,
                            lease_topic=s.ha.lease_topic,
                            waited_s=round(time.monotonic() - since),
                        )
                    if time.monotonic() >= rejoin_at:
                        rejoin_at = time.monotonic() + lease_rejoin_after_s(s.ha.session_timeout_s)
                        rejoin_if_orphaned(self.w, self.lease, watch, round(time.monotonic() - since))
                if self.stop.is_set():
                    break
                self._set_leader(True)
                try:
                    self._new_term(self.term)
                    self.start()
                    self.log.info("leading", agent_id=self.agent_id, epoch=self.w.epoch)
                    self._serve_term()
                except (LeaseLost, ProducerFenced) as e:
                    if isinstance(e, ProducerFenced):
                        self._fenced(e)
                    self.log.warning("leadership lost; standing by", agent_id=self.agent_id, reason=str(e))
                else:  # stopped: the released heartbeat goes out while the lease is still ours
                    self._release()
                finally:
                    self._end_term()
                    self._set_leader(False)
                    self.term.ready = False
                    self.metrics.set(metric.READY, 0)
                    self._publish_status()
        finally:
            self.lease.close()
            self.lease = None
            watch.close()

    def _release(self) -> None:
        """A clean stop's last heartbeat, ``released: true``, so a successor does not wait for ours to age
        (docs/agent.md); only by the agent that wrote heartbeats and still holds the lease, if any."""
        if self.lease_tail is not None and (self.lease is None or self.lease.held):
            self.heartbeats.release(self.term.replayed)

    def close(self) -> None:
        if self.http is not None:
            self.http.close()
            self.http = None
        if self.io.webhook is not None:
            self.io.webhook.close(min(self.settings.io_timeout_s, 2 * self.settings.webhook.timeout_s))
            self.io.webhook = None
        self._release()
        self._end_term()
        if isinstance(self.admin, IsolatedGroupsAdmin):
            self.admin.close()
        if self.w.publisher is not None:
            left = self.w.publisher.flush(self.settings.io_timeout_s) if self._own_publisher else 0
            if left:
                self.log.error("records left unconfirmed at shutdown", count=left)
            self.w.publisher = None
        self.log.info("agent stopped")
