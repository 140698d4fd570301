"""``rackplan check``: one observe-only cycle of the agent itself, and what it found, without acting.

The check is the agent, not a twin of it: an :class:`~.loop.Agent` in observe
mode (:mod:`.observe`: nothing written, no lease, no heartbeat) reaches the
brokers as ``agent run`` does (within ``kafka.startup_timeout_s``), replays the
plan and registrations topics read-only (no consumer group is joined: the
readers assign partitions), and runs one cycle: snapshot, rack checks, plans,
alerts.  Unlike ``agent run`` it creates no topic (a missing one is reported),
archives no snapshot and sends nothing to the webhook.  One cycle never waits out
``alerts.for_s``, so the rules run without it and an alert they raise is listed
``pending`` (what it becomes once its condition holds for ``for_s``): with the
hold-down a cross-rack group read "ok".  :func:`findings` turns
what the cycle saw into the report the command prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.ports import AdminPort
from ..cycle.status import GroupView
from ..kafka.exceptions import TopicReadError
from ..kafka.read_back import read_back
from ..protocol.alerts import FIRING, UNFIXABLE, AlertEvent
from ..protocol.plans import PlanRecord
from ..settings.sections import Settings
from ..state.term import CycleReport
from ..traffic.selector import RACK_AWARE, SETTING, SelectorReport
from .loop import Agent
from .startup import topic_specs
from .watch import plan_skipped

#: the agent's topics by their role in the report
#: the role of each of the agent's topics, in ``topic_specs`` order (the traffic feed's last: it may be off)
ROLES = ("plans", "alerts", "registrations", "lease", "traffic")


@dataclass
class Findings:
    """What ``rackplan check`` prints: the JSON document of ``--json``; ``problems`` decide the exit code."""

    brokers: list[dict[str, Any]] = field(default_factory=list)
    topics: list[dict[str, Any]] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)
    would_publish: list[str] = field(default_factory=list)
    would_tombstone: list[str] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: the brokers' replica.selector.class (rackplan.agent.traffic.selector; None: not checked)
    replica_selector: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": not self.problems,
            "brokers": self.brokers,
            "racks": sorted({b["rack"] for b in self.brokers if b["rack"] is not None}),
            "agent_topics": self.topics,
            "groups": self.groups,
            "would_publish": self.would_publish,
            "would_tombstone": self.would_tombstone,
            "alerts": self.alerts,
            "problems": self.problems,
            "replica_selector": self.replica_selector,
        }


def checking(settings: Settings) -> Settings:
    """``settings`` as the check runs them: observe mode, no archive, no webhook (nothing leaves the process),
    and no ``alerts.for_s`` hold-down (one cycle cannot wait it out: :func:`alert_entry`)."""
    quiet = settings.webhook.model_copy(update={"url": None})
    at_once = settings.alerts.model_copy(update={"for_s": 0.0})
    return settings.model_copy(
        update={"mode": "observe", "archive_dir": None, "webhook": quiet, "alerts": at_once}
    )


def run_check(settings: Settings, admin: AdminPort | None = None) -> Findings:
    """One observe-only cycle against the cluster of ``settings``; :class:`~..core.errors.CannotRun` when
    the bootstrap servers cannot be reached within ``kafka.startup_timeout_s``."""
    s = checking(settings)
    agent = Agent(s, admin=admin)
    try:
        agent._first_contact()
        existing = set(agent.admin.list_topics(timeout=s.metadata.request_timeout_s).topics)
        records: list[tuple[str, PlanRecord | None]] = []
        unread: list[str] = []
        if s.plan_topic in existing:
            skipped = lambda reason: plan_skipped(agent.w, reason)  # noqa: E731
            try:
                records = read_back(
                    agent.client_config, s.plan_topic, s.io_timeout_s, agent.log, skipped, agent.w.secret
                )
            except TopicReadError as e:  # a broker down: a finding, as the agent would retry it
                unread.append(f"the plan topic could not be read to its end (generations start over): {e}")
        if s.registrations_topic in existing:
            agent.intake.open(agent.client_config, agent.term)
        agent.begin(records)
        replayed = {key: rec.generation for key, rec in agent.status().plans}
        report = agent.run_once()
        out = findings(agent, report, existing, replayed, settings.alerts.for_s)
        out.problems[:0] = unread
        return out
    finally:
        agent.close()


def findings(
    agent: Agent, report: CycleReport, existing: set[str], replayed: dict[str, int], for_s: float = 0.0
) -> Findings:
    """The report of one cycle: brokers and racks, the agent's topics, each group and what it would get.

    ``replayed``: the generation of each plan of record on the plan topic (what followers read now);
    ``for_s``: the settings' ``alerts.for_s`` (:func:`alert_entry`)."""
    s = agent.settings
    out = Findings()
    for role, spec in zip(ROLES, topic_specs(s), strict=False):
        out.topics.append({"role": role, "name": spec.name, "exists": spec.name in existing})
    if not report.ok or report.snapshot is None:
        out.problems.append(f"the cluster could not be described: {report.error}")
        return out
    racks = report.snapshot.resolve_racks(agent.term.known)
    out.brokers = [{"id": b, "rack": racks.get(b)} for b in sorted(report.snapshot.brokers)]
    if not any(b["rack"] for b in out.brokers):
        out.problems.append("no broker has a rack (broker.rack): nothing can be planned for locality")
    planned = {rec.key: rec for rec in report.published}
    view = agent.status()
    for g in view.groups_json():
        entry = group_entry(g, planned.get(g["key"]), report.skipped.get(g["key"]))
        entry["plan_of_record_generation"] = replayed.get(g["key"])
        out.groups.append(entry)
        out.problems.extend(group_problems(entry))
    out.replica_selector, problem = selector_finding(view.selector, view.groups)
    out.problems += problem
    out.would_publish = sorted(planned)
    out.would_tombstone = sorted(report.tombstoned)
    out.alerts = [alert_entry(e, for_s) for e in report.alerts]
    return out


def alert_entry(event: AlertEvent, for_s: float) -> dict[str, Any]:
    """One alert the cycle raised, evaluated without a hold-down: ``pending`` when the settings have one
    (``for_s``: it fires, or is reported unfixable, once the condition holds that long), else as sent."""
    held = for_s > 0 and event.status in (FIRING, UNFIXABLE)
    return {
        "key": event.key,
        "status": "pending" if held else event.status,
        "alertname": event.alertname,
        "for_s": for_s,
        "reason": event.reason,
    }


def selector_finding(
    selector: SelectorReport | None, groups: Sequence[GroupView]
) -> tuple[dict[str, Any] | None, list[str]]:
    """The replica selector's state, and a problem when some broker lacks it and a group counts on it."""
    if selector is None:
        return None, []
    near = [g.reg.key for g in groups if g.reg.fetch_mode == "nearest-replica"]
    if selector.state != "absent" or not near:
        return selector.as_json(), []
    return selector.as_json(), [
        f"brokers {', '.join(map(str, selector.lacking()))} lack {SETTING}={RACK_AWARE}: the nearest-replica "
        f"groups {', '.join(near)} read from partition leaders (their bytes figures are judged in leader mode)"
    ]


def group_entry(g: dict[str, Any], rec: PlanRecord | None, skipped: str | None) -> dict[str, Any]:
    """One group as the check shows it: where it comes from, and the plan it would get (or why none)."""
    entry = {k: g.get(k) for k in ("key", "kind", "name", "source", "members", "topics", "problem")}
    entry["unknown_member_racks"] = g.get("unknown_member_racks", [])
    entry["unknown_topic_subscriptions"] = g.get("unknown_topic_subscriptions", [])
    entry["plan_skipped"] = skipped
    for k in ("path", "assignor", "plan_published", "live", "achievable"):  # a group the broker assigns
        if k in g:
            entry[k] = g[k]
    if rec is None:
        entry["plan"] = None
        return entry
    before = rec.locality_before
    entry["plan"] = {
        "generation": rec.generation,
        "reason": rec.reason,
        "state": rec.state,
        "moved": rec.moved,
        "cross_rack_before": None if before is None else before.cross_rack,
        "cross_rack_after": rec.locality_after.cross_rack,
        "partitions": rec.locality_after.total,
    }
    return entry


def group_problems(g: dict[str, Any]) -> list[str]:
    """What keeps a group from the plan its settings or registrations intend, one line each."""
    key = g["key"]
    out: list[str] = []
    if g.get("problem"):
        out.append(f"{key}: cannot be used: {g['problem']}")
    if g.get("plan_skipped"):
        out.append(f"{key}: no plan: {g['plan_skipped']}")
    for m in g.get("unknown_member_racks", []):
        near = ", ".join(m["nearest_known_racks"]) or "none"
        out.append(
            f"{key}: member {m['member']!r} has rack {m['rack']!r}, which no broker has (nearest: {near})"
        )
    for m in g.get("unknown_topic_subscriptions", []):
        out.append(
            f"{key}: member {m['member']!r} subscribes to {m['topic']!r}, which the cluster does not have"
        )
    return out
