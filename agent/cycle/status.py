"""The agent's status as an immutable value: built at the end of each cycle, published by swapping one reference.

The HTTP server's threads and the demo read only a :class:`StatusView`: never
the loop's plan book, registrations or alert state, which the loop keeps
changing.  A view is built from frozen pieces (plan records, registrations,
follower statuses and handovers are frozen dataclasses) held in tuples and
read-only mappings, so a reader needs no lock and no copy; assigning the new
view to one attribute is atomic, so a reader sees one cycle's view whole.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..groups.live import LiveLocality
from ..groups.paths import GroupPath
from ..ha.leader_watch import LeaderWatch, Standby, standby_of
from ..planning.handover import Pending
from ..planning.planner import Registration
from ..planning.rack_check import RackMismatch
from ..planning.subscriptions import MissingTopic
from ..protocol.alerts import AlertEvent
from ..protocol.plans import Locality, PlanKey, PlanRecord
from ..protocol.registrations import FollowerStatus
from ..state.term import Term, Wiring
from ..traffic.selector import SelectorReport

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class GroupView:
    """One registration as /v1/groups shows it."""

    reg: Registration
    plan: PlanRecord | None
    alert_firing: bool
    alert_state: str
    followers: Mapping[str, FollowerStatus]
    handover: Pending | None
    #: the live assignment when last described (None: not described)
    live: LiveLocality | None = None
    rack_mismatches: tuple[RackMismatch, ...] = ()
    missing_topics: tuple[MissingTopic, ...] = ()
    #: the path that assigns it (None: not classified yet); on the broker's, the agent's plan's locality
    path: GroupPath | None = None
    broker: bool = False
    achievable: Locality | None = None
    #: what its locality is judged on this cycle (``live``, ``plan_of_record``, ``none``; None: not yet)
    basis: str | None = None

    def route_json(self) -> dict[str, Any]:
        """Its path (``classic-followers``, ``kip848-broker``, ``streams-broker``, ``unknown``), the assignor on
        it, and for a broker-assigned group (no plan published) its live and achievable locality."""
        out: dict[str, Any] = {"path": None, "assignor": None} if self.path is None else self.path.as_json()
        if self.broker:
            out["plan_published"] = False
            out["live"] = None if self.live is None else self.live.as_json()
            out["achievable"] = None if self.achievable is None else self.achievable.as_json()
        return out

    def as_json(self) -> dict[str, Any]:
        reg, rec, pending = self.reg, self.plan, self.handover
        return {
            **self.route_json(),
            "key": reg.key,
            "kind": reg.kind,
            "name": reg.name,
            "source": reg.source,
            "members": reg.members,
            "fetch_mode": reg.fetch_mode,
            "topics": sorted(reg.topics),
            "generation": None if rec is None else rec.generation,
            "locality": None if rec is None else rec.locality_after.as_json(),
            "alert_firing": self.alert_firing,
            "alert_state": self.alert_state,
            "state": None if rec is None else rec.state,
            "followers": {
                m: {"mode": f.mode, "released_generation": f.released_generation}
                for m, f in self.followers.items()
            },
            "handover": None
            if pending is None
            else {
                "revoking_generation": pending.generation,
                "awaiting": list(pending.awaiting),
                "outstanding": pending.outstanding(self.followers),
            },
            "live": None if self.live is None else self.live.as_json(),
            "locality_basis": self.basis,
            "unknown_member_racks": [m.as_json() for m in self.rack_mismatches],
            "unknown_topic_subscriptions": [m.as_json() for m in self.missing_topics],
        }


@dataclass(frozen=True, slots=True)
class StatusView:
    """What the agent shows at the end of a cycle (and after start-up and each handover check)."""

    ready: bool = False
    #: plans of record, by key (sorted)
    plans: tuple[tuple[str, PlanRecord], ...] = ()
    #: key -> the foreign record followers act on (see rackplan.agent.runtime.watch.watch_plans)
    discrepancies: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: _EMPTY)
    groups: tuple[GroupView, ...] = ()
    #: registrations that cannot be used: key -> reason (sorted)
    problems: tuple[tuple[str, str], ...] = ()
    firing: tuple[AlertEvent, ...] = ()
    #: this agent's id and leadership epoch (:func:`with_role`, when a reader asks)
    agent_id: str = ""
    epoch: int = 0
    #: set while this agent does not lead: who does, as far as it knows, and where the plans are
    standby: Standby | None = None
    #: key -> the group's bytes figures under measured traffic (rackplan.agent.cycle.traffic_step)
    traffic: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: _EMPTY)
    #: the brokers' replica.selector.class as last checked (None: not checked)
    selector: SelectorReport | None = None

    def plans_json(self) -> dict[str, Any]:
        """/v1/plans: plans of record; a key whose newest record someone else wrote (what followers read then)
        carries ``discrepancy``: that record's writer, generation, offset, tombstone.  A standby holds no
        plans: it answers who leads and where the plans are instead (issue 28: it answered ``{}``)."""
        if self.standby is not None:
            return self.standby.as_json()
        out: dict[str, Any] = {k: rec.value() for k, rec in self.plans}
        for key, figures in self.traffic.items():
            if key in out:
                out[key] = {**out[key], "traffic": dict(figures)}
        for key, seen in sorted(self.discrepancies.items()):
            out.setdefault(key, {})["discrepancy"] = dict(seen)
        for g in self.groups:  # each group's path; a broker-assigned one is here without a plan
            if g.broker or g.reg.key in out:
                out.setdefault(g.reg.key, {}).update(g.route_json())
        return dict(sorted(out.items()))

    def status_json(self) -> dict[str, Any]:
        """/v1/status: this agent's role; a leader's id, epoch and plan count, a standby's leader."""
        if self.standby is not None:
            return {**self.standby.as_json(), "ready": self.ready}
        return {
            "role": "leader",
            "agent_id": self.agent_id,
            "epoch": self.epoch,
            "ready": self.ready,
            "plans": len(self.plans),
            "groups": {g.reg.key: g.route_json() for g in self.groups},
            "replica_selector": None if self.selector is None else self.selector.as_json(),
        }

    def groups_json(self) -> list[dict[str, Any]]:
        """/v1/groups: registrations (with where they came from) and, last, those that cannot be used and why."""
        out = [g.as_json() for g in self.groups]
        for key, reason in self.problems:
            k = PlanKey.split(key)
            out.append({"key": key, "kind": k.kind, "name": k.name, "problem": reason})
        return out

    def group_json(self, kind: str, name: str) -> dict[str, Any] | None:
        key = str(PlanKey(kind, name))
        return next((g for g in self.groups_json() if g["key"] == key), None)


def build_status(term: Term) -> StatusView:
    """The view of ``term`` now (called on the loop's thread only)."""
    followers: dict[tuple[str, str], dict[str, FollowerStatus]] = {}
    for e in term.store.entries():
        if e.follower is not None:
            followers.setdefault((e.kind, e.name), {})[str(e.member.get("member_id"))] = e.follower
    firing = set(term.alerts.firing())
    groups = []
    for reg in term.regs:
        g = term.groups.get(reg.key)
        mine = followers.get((reg.kind, reg.name), {})
        groups.append(
            GroupView(
                reg=reg,
                plan=term.book.latest(reg.key),
                alert_firing=reg.key in firing,
                alert_state=term.alerts.state(reg.key),
                followers=MappingProxyType(dict(sorted(mine.items()))),
                handover=None if g is None else g.handover,
                live=None if g is None else g.live,
                rack_mismatches=() if g is None else g.rack_mismatches,
                missing_topics=() if g is None else g.missing_topics,
                path=None if g is None else g.path,
                broker=g is not None and g.broker_assigned(),
                achievable=None if g is None else g.achievable,
                basis=None if g is None else g.basis,
            )
        )
    plans = tuple((k, rec) for k in term.book.live_keys() if (rec := term.book.latest(k)) is not None)
    discrepancies = {k: MappingProxyType(dict(v)) for k, v in term.discrepancies().items()}
    return StatusView(
        ready=term.ready,
        plans=plans,
        discrepancies=MappingProxyType(discrepancies),
        groups=tuple(groups),
        problems=tuple(sorted(term.problems.items())),
        firing=tuple(term.alerts.firing_events()),
        traffic=MappingProxyType(
            {k: g.traffic for k, g in sorted(term.groups.items()) if g.traffic is not None}
        ),
        selector=term.selector,
    )


def with_role(view: StatusView, w: Wiring, leading: bool, watch: LeaderWatch | None) -> StatusView:
    """``view`` as this agent shows it now (called per request, from any thread): with its id and epoch,
    and while it stands by (it does not lead and watches the lease topic: ``watch``), who leads
    (:mod:`rackplan.agent.ha.leader_watch`)."""
    standby = None if leading or watch is None else standby_of(w, watch)
    return dataclasses.replace(view, agent_id=w.agent_id, epoch=w.epoch, standby=standby)
