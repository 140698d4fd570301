"""Groups the broker assigns (KIP-848, KIP-1071): classified, given no plan, judged against the agent's plan.

Each cycle every registration is put on its path (:mod:`rackplan.agent.groups.paths`)
from the descriptions the intake step made (one DescribeConsumerGroups per
batch of groups, this cycle's, never asked again in the cycle).  For a group
the broker assigns, the plan step publishes nothing: its members ignore follower
plans, and one on the plan topic would only mislead whoever reads it (a KIP-848
group on the ``rackplan`` broker assignor is the exception: that plugin reads plans).  The agent
still computes the plan it would publish (a fresh one, no stickiness: what the
group could get), keeps its locality as *achievable*, and judges the
coordinator's live assignment against it with the one alert state machine
(:mod:`rackplan.agent.alerts.rules`): the achievable locality is both the
baseline and the plan, so the alert fires when the live fraction is above the
threshold while the achievable one is not, or ``worsen_delta`` above the
achievable one; when even the achievable one is above the threshold, only the
unfixable report is made.
"""

from __future__ import annotations

from ..cluster.metadata import Snapshot
from ..groups.live import describable
from ..groups.paths import UNKNOWN, GroupPath, classify
from ..metrics import declared as metric
from ..planning.planner import plan_for
from ..protocol.alerts import AlertEvent
from ..protocol.plans import CONSUMER, Locality
from ..state.term import CycleReport, Racks, Term, Wiring, labels


def classify_groups(w: Wiring, term: Term) -> None:
    """Every registration's path this cycle (``g.path``) and the last one other than ``unknown``;
    ``rackplan_group_path`` says it per group."""
    protocols = {a["application_id"]: a.get("group_protocol") for a in w.settings.streams_apps}
    series: dict[tuple[tuple[str, str], ...], float] = {}
    for reg in term.regs:
        g = term.group(reg.key)
        real = term.real_groups.get(reg.name) if reg.kind == CONSUMER else None
        followers = bool(term.store.followers(reg.kind, reg.name))
        if reg.kind == CONSUMER and real is None and g.path is not None:
            path = g.path  # not described this cycle (describing is off, or failed): the last word holds
        else:
            path = classify(reg.kind, real, followers=followers, group_protocol=protocols.get(reg.name))
        if g.path != path:
            w.log.info("group path", key=reg.key, **path.as_json())
        unplanned = g.broker_assigned()
        g.path = path
        if path.path != UNKNOWN:
            g.known_path = path
        if unplanned and not g.broker_assigned():
            g.retry = True  # plans are read again (rolled back, or onto the rackplan assignor): one is due
        if not g.broker_assigned() and g.achievable_memo is not None:
            g.achievable = g.achievable_memo = None
            w.metrics.remove(metric.ACHIEVABLE_CROSS_RACK_PARTITIONS, labels(reg.key))
        lab = {**labels(reg.key), "path": path.path, "assignor": path.assignor or ""}
        series[tuple(sorted(lab.items()))] = 1.0
    w.metrics.replace(metric.GROUP_PATH, {}, series)


def achievable(w: Wiring, term: Term, report: CycleReport, snap: Snapshot, racks: Racks) -> None:
    """For each broker-assigned group, the locality of the plan the agent would publish (computed again only
    for another snapshot, rack map or registration); ``rackplan_achievable_cross_rack_partitions``."""
    for reg in term.regs:
        g = term.group(reg.key)
        if not g.broker_assigned():
            continue
        memo = g.achievable_memo
        if memo is not None and memo[0] is snap and memo[1] is racks and memo[2] == reg.fingerprint:
            continue
        g.achievable_memo = (snap, racks, reg.fingerprint)
        try:
            g.achievable = plan_for(snap, racks, reg, None).after
        except Exception as e:  # no plan (a topic missing, no members): nothing to judge against
            g.achievable = None
            report.skipped[reg.key] = str(e) or repr(e)
            w.log.info("no achievable plan for a broker-assigned group", key=reg.key, reason=str(e))
            w.metrics.remove(metric.ACHIEVABLE_CROSS_RACK_PARTITIONS, labels(reg.key))
            continue
        w.metrics.set(metric.ACHIEVABLE_CROSS_RACK_PARTITIONS, g.achievable.cross_rack, labels(reg.key))


def judge(w: Wiring, term: Term, report: CycleReport) -> tuple[list[AlertEvent], set[str]]:
    """Alert events of broker-assigned groups (their live assignment this cycle against the achievable
    plan), and every broker-assigned key: the plan-based alert steps leave them alone.

    A group described with nobody holding a partition (empty, or its members holding nothing: its topics
    deleted) reads nothing across racks, so it is judged at 0 of 0 whether or not the agent could make it a
    plan: no plan can be made for a group without members or topics, and an alert waiting for one would
    never resolve.  A group not described this cycle (and every KIP-1071 app, never described) is not judged.
    """
    now = w.clock()
    events: list[AlertEvent] = []
    judged: set[str] = set()
    for reg in term.regs:
        g = term.group(reg.key)
        if not g.broker_assigned():
            continue
        judged.add(reg.key)
        live, best = report.live.get(reg.key), g.achievable
        if describable(reg, term.real_groups, w.kip1071) is not None and (live is None or not live.total):
            current = Locality(0, 0)  # described, and nobody reads a partition: a firing alert resolves
        elif live is None or best is None or not live.judged.total:
            continue
        else:
            current = live.judged
        ev = term.alerts.evaluate(
            reg.key, best or current, current, best, _reason(g.path, current, best), now
        )
        if ev is not None:
            events.append(ev)
    return events, judged


def _reason(path: GroupPath | None, current: Locality, best: Locality | None) -> str:
    """The alert's reason: the broker's assignor and both counts (the achievable one when a plan could be made)."""
    assignor = "" if path is None or path.assignor is None else f" ({path.assignor})"
    now = f"the broker's assignment{assignor}: {current.cross_rack} of {current.total} partitions read cross-rack"
    if best is None:
        return f"{now}; the agent can make it no plan"
    return f"{now}, the agent's plan would read {best.cross_rack} of {best.total}"
