"""What the agent knows between cycles: one :class:`GroupRecord` per plan key inside one :class:`Term`.

A leadership term starts from scratch (:class:`Term` is made anew): the plan
book replayed from the topic, the registrations merged, and per plan key one
record of everything learnt about it: the fingerprints and memos of planning,
whether it must be retried, a publish in doubt, a foreign record to answer, a
handover in flight.  One record per key, not one dict per concern, so that
forgetting a key or showing it is one place.  :class:`Wiring` holds what the
cycle's stages talk to (settings, log, metrics, clock, publisher, the lease
guard); the stages (:mod:`.cycle` and its steps) take both and return values.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..alerts.rules import AlertState
from ..cluster.diff import Debounce, SnapshotDiff, diff
from ..cluster.metadata import Snapshot
from ..core.ports import Clock, Logger, PlanPublisher
from ..groups.live import LiveLocality
from ..groups.membership import RealGroup
from ..groups.paths import GroupPath, broker_streams_apps, publishes
from ..groups.registry import RegistrationStore
from ..metrics.registry import Metrics
from ..planning.handover import Pending
from ..planning.planner import Registration
from ..planning.rack_check import RackMismatch
from ..planning.subscriptions import MissingTopic
from ..protocol.alerts import AlertEvent
from ..protocol.plans import Locality, PlanKey, PlanRecord
from ..settings.sections import Settings
from ..traffic.selector import SelectorReport
from .plan_book import PlanBook

Racks = dict[int, str | None]
#: findings of each kind a plan's reason names (as a change's reason names at most 8 partitions)
NOTES_LIMIT = 5


def labels(key: str) -> dict[str, str]:
    """Metric labels of a plan key ``kind/name``."""
    k = PlanKey.split(key)
    return {"kind": k.kind, "group": k.name}


@dataclass
class CycleReport:
    """What one cycle did; the demo and the tests read it."""

    ok: bool
    snapshot: Snapshot | None = None
    change: SnapshotDiff | None = None
    pending_polls: int = 0
    confirmed: bool = False
    published: list[PlanRecord] = field(default_factory=list)
    tombstoned: list[str] = field(default_factory=list)
    alerts: list[AlertEvent] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    #: registration keys added, changed (definition) and removed this cycle
    registered: list[str] = field(default_factory=list)
    reregistered: list[str] = field(default_factory=list)
    unregistered: list[str] = field(default_factory=list)
    #: plans that completed a two-phase handover since the last cycle (published between cycles)
    completed: list[PlanRecord] = field(default_factory=list)
    #: consumer groups described this cycle: locality of their live assignment (DescribeGroups)
    live: dict[str, LiveLocality] = field(default_factory=dict)
    error: str = ""
    duration_s: float = 0.0


#: inputs a skipped plan was skipped on: registration fingerprint, scope fingerprint, plan of record, followers
SkipInputs = tuple[str, str, PlanRecord | None, bool]


@dataclass(slots=True)
class GroupRecord:
    """Everything the agent tracks of one plan key between cycles (a registered group, or one being tombstoned)."""

    key: str
    # ---- planning
    #: scope fingerprint of the registration at the acted snapshot
    fp: str | None = None
    #: (snapshot, racks, registration fingerprint, scope fingerprint) of the last fingerprint computed
    fp_memo: tuple[Snapshot, Racks, str, str] | None = None
    #: (inputs, reason) of a plan skipped (PlanSkipped) on those inputs
    skipped: tuple[SkipInputs, str] | None = None
    #: the reason last logged for a skipped plan (logged once per distinct reason)
    skip_logged: str | None = None
    #: (snapshot, racks, plan, registration fingerprint, floor) of the last locality floor computed
    best_memo: tuple[Snapshot, Racks, PlanRecord, str, Locality] | None = None
    #: per-rack locality of a plan just computed, so metrics need no second count
    planned_by_rack: Mapping[str | None, Locality] | None = None
    #: the reason last logged for a registration that cannot be used
    problem_logged: str | None = None
    # ---- what is due
    #: must be (re)considered next cycle: a new or changed registration, a failure
    retry: bool = False
    #: its initial state has not been evaluated for alerts yet
    initial_pending: bool = False
    #: its per-rack metrics must be computed (replayed and new plans)
    metrics_pending: bool = False
    #: unregistered: its tombstone is still to be published
    tombstone_pending: bool = False
    # ---- publishing
    #: the reason of a plan whose publish failed, reused when it is retried
    unpublished_reason: str | None = None
    #: a plan whose publish timed out: it may still land, so its generation is never reused
    in_doubt: PlanRecord | None = None
    #: the value of the plan last confirmed, recognised when read back
    sent: bytes | None = None
    # ---- other writers
    #: the newest record followers act on is foreign: :attr:`reassert_plan` is that plan (None: a tombstone)
    reassert: bool = False
    reassert_plan: PlanRecord | None = None
    #: that foreign record as /v1/plans shows it, until this agent publishes the key again
    discrepancy: Mapping[str, Any] | None = None
    # ---- handovers
    #: a two-phase handover whose revoking plan is out and whose target is not
    handover: Pending | None = None
    #: when the group's followers were last asked to come back from group subscription
    rejoin_at: float = -math.inf
    #: observe mode: the members in group subscription already asked back (its plans never reach them)
    rejoin_asked: frozenset[str] = frozenset()
    #: a handover whose target could not be published is retried after this
    handover_retry_at: float = -math.inf
    #: plan followers were seen in the group this term: its plans list what holders that left may still
    #: read (``handover.unreleased``) even once every follower is gone (expired through an outage, they
    #: may come back reading the plan they knew)
    followed: bool = False
    # ---- what the operator must be told (issue 24)
    #: locality of the live assignment when last described
    live: LiveLocality | None = None
    #: what its locality is judged on this cycle: ``live``, ``plan_of_record`` or ``none`` (groups.basis)
    basis: str | None = None
    #: live members of unknown rack last logged
    unknown_logged: tuple[str, ...] = ()
    #: registered members whose rack no broker has
    rack_mismatches: tuple[RackMismatch, ...] = ()
    #: subscriptions to topics the acted snapshot lacks (left out of plans)
    missing_topics: tuple[MissingTopic, ...] = ()
    #: (registration fingerprint, snapshot, broker racks) the two above were found for
    checked: tuple[str, Snapshot, frozenset[str]] | None = None
    # ---- the path that assigns it (issue 27 §4)
    #: this cycle's path (None: not classified yet) and the last one other than ``unknown``
    path: GroupPath | None = None
    known_path: GroupPath | None = None
    #: a broker-assigned group: locality of the plan the agent would publish (not published), and the
    #: (snapshot, racks, registration fingerprint) it was computed for
    achievable: Locality | None = None
    achievable_memo: tuple[Snapshot, Racks, str] | None = None
    #: when the plan of record was last weighed against a plan for measured traffic (traffic.window_s apart)
    traffic_checked_at: float = -math.inf
    #: the group's bytes figures as /v1/plans shows them (None: no traffic measured for it)
    traffic: Mapping[str, Any] | None = None

    def notes(self) -> list[str]:
        """What a plan's reason adds: the registration's mistakes planning worked around, at most
        :data:`NOTES_LIMIT` of each kind (``/v1/groups`` lists them all)."""
        out: list[str] = []
        for found in (self.rack_mismatches, self.missing_topics):
            out += [m.text() for m in found[:NOTES_LIMIT]]
            if len(found) > NOTES_LIMIT:
                out.append(f"+{len(found) - NOTES_LIMIT} more (/v1/groups)")
        return out

    def broker_assigned(self) -> bool:
        """The broker assigns the group (KIP-848, KIP-1071) without reading plans: the agent publishes none."""
        return self.path is not None and not publishes(self.path, self.known_path)

    def forget_planning(self) -> None:
        """The registration is gone: what was learnt planning it (and checking it) no longer applies."""
        self.fp = self.fp_memo = self.skipped = self.best_memo = self.checked = self.live = None
        self.path = self.known_path = self.achievable = self.achievable_memo = None
        self.rack_mismatches, self.missing_topics, self.unknown_logged = (), (), ()


class Term:
    """Everything learnt from the topics and the cluster in one leadership term."""

    def __init__(
        self, settings: Settings, file_regs: list[Registration], previous: Term | None = None
    ) -> None:
        """``previous``: this agent's last term, whose unfixable reports stand (:meth:`AlertState.keep_reports`)."""
        s = settings
        self.book = PlanBook()
        self.regs: list[Registration] = list(file_regs)
        #: registrations that cannot be used now: key -> reason
        self.problems: dict[str, str] = {}
        self.store = RegistrationStore(s.registrations.ttl_s, s.registrations.max_clock_skew_s)
        self.groups: dict[str, GroupRecord] = {}
        #: the registrations topic was read to its end at least once (else nothing is tombstoned)
        self.reg_synced = False
        #: real membership described this cycle, by group id
        self.real_groups: dict[str, RealGroup] = {}
        #: group ids whose description failed this cycle while describing works (a coordinator moving)
        self.undescribed: frozenset[str] = frozenset()
        self.merge_key: Any = None
        self.alerts = AlertState(s.alerts)
        if previous is not None:
            self.alerts.keep_reports(previous.alerts)
        self.known: dict[int, str] = {}
        self.acted: tuple[Snapshot, Racks] | None = None
        self.last_good: Snapshot | None = None
        self.debounce: Debounce[tuple[Snapshot, Racks]] = Debounce(
            s.change_persist_polls, lambda a, b: diff(a[0], b[0], a[1], b[1]).empty
        )
        self.tombstoned_at_start: list[str] = []
        #: targets published between cycles, reported with the next cycle
        self.completed: list[PlanRecord] = []
        self.replayed = False
        self.ready = False
        #: bytes/s per partition measured this cycle (rackplan.agent.traffic): empty when none is
        self.traffic: Mapping[str, tuple[float, ...]] = {}
        #: whether a snapshot with measured traffic was archived (the first measured window gets one)
        self.traffic_archived = False
        #: bytes/s each consumer group reads (committed offsets), by group id: only groups that commit
        self.reads: Mapping[str, Mapping[str, tuple[float, ...]]] = {}
        #: the brokers' replica.selector.class as last checked (rackplan.agent.traffic.selector; None: not yet)
        self.selector: SelectorReport | None = None

    def group(self, key: str) -> GroupRecord:
        """The record of ``key``, made on first use."""
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = GroupRecord(key)
        return g

    def where(self, test: Callable[[GroupRecord], bool]) -> list[str]:
        """Keys whose record passes ``test``, sorted."""
        return sorted(k for k, g in self.groups.items() if test(g))

    def handovers(self) -> Iterator[tuple[str, Pending]]:
        """Handovers in flight, by key."""
        for k in sorted(self.groups):
            h = self.groups[k].handover
            if h is not None:
                yield k, h

    def handover_count(self) -> int:
        return sum(1 for g in self.groups.values() if g.handover is not None)

    def discrepancies(self) -> dict[str, Mapping[str, Any]]:
        return {
            k: g.discrepancy for k in sorted(self.groups) if (g := self.groups[k]).discrepancy is not None
        }

    def registered(self) -> dict[str, Registration]:
        return {r.key: r for r in self.regs}


class Wiring:
    """What the cycle's stages talk to: settings, log, metrics, clock, the publisher and the lease guard.

    ``publisher`` is None before start-up and after the producer was fenced;
    ``guard`` proves, before a publish, that the lease is still held.
    """

    def __init__(
        self,
        settings: Settings,
        log: Logger,
        metrics: Metrics,
        clock: Clock,
        stop: threading.Event,
        agent_id: str,
    ) -> None:
        self.settings = settings
        self.log = log
        self.metrics = metrics
        self.clock = clock
        self.stop = stop
        self.agent_id = agent_id
        self.publisher: PlanPublisher | None = None
        self.epoch = 0
        self.guard: Callable[[], None] = lambda: None
        #: the shared secret (registrations.secret_file) that signs registrations and authenticates plans and
        #: heartbeats (rackplan.agent.protocol.mac); None: records are unauthenticated
        self.secret: bytes | None = settings.registrations.secret()
        #: application ids of the KIP-1071 Streams apps (never described), fixed with the settings
        self.kip1071: frozenset[str] = broker_streams_apps(settings.streams_apps)

    @property
    def lease_group(self) -> str | None:
        return self.settings.ha.group_id if self.settings.ha.enabled else None

    def publisher_info(self) -> dict[str, Any] | None:
        """Who published a plan, when several agents may: agent id and leadership epoch."""
        if not self.settings.ha.enabled:
            return None
        return {"agent_id": self.agent_id, "epoch": self.epoch}
