"""Whether the brokers let consumers read from a replica in their own rack: the premise of nearest-replica figures.

A consumer fetches from a follower in its rack only when the partition's
leader runs ``replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector``
(KIP-392) and the consumer sets ``client.rack``; otherwise every read goes to
the leader, and a figure that assumes a local replica is read (the
``nearest-replica`` fetch mode) undercounts what crosses racks.  The agent
asks every broker (DescribeConfigs, :mod:`rackplan.agent.kafka.broker_configs`)
at its first cycle and every ``traffic.replica_selector_check_s``:

- ``rack-aware``: every broker answered with the rack-aware selector;
- ``absent``: at least one answered without it (unset: the leader serves
  every read, or set to a class rackplan does not know): reads of the
  partitions it leads go to the leader, so ``nearest-replica`` groups are
  judged as ``leader`` groups (:func:`judged_mode`);
- ``unknown``: no broker said it lacks the selector, but some would not say
  (the API unsupported, the principal not allowed, no answer): the group's
  own fetch mode is kept, and the report says it is not confirmed.

A broker that fails to answer a later check keeps its last answer (a broker
restarting does not flip the verdict); transient errors are asked again with
backoff within the check.  Each new verdict is logged once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..cluster.metadata import jittered_delays
from ..core.ports import AdminPort, Logger
from ..kafka.broker_configs import broker_setting
from ..kafka.errors import transient
from ..settings.traffic import TrafficSettings

#: the broker setting, and the one value that makes followers in the consumer's rack serve its reads
SETTING = "replica.selector.class"
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

SelectorState = Literal["rack-aware", "absent", "unknown"]
STATES: tuple[SelectorState, ...] = ("rack-aware", "absent", "unknown")


@dataclass(frozen=True, slots=True)
class SelectorReport:
    """The verdict and what each broker said: its value (None: unset) or why it said nothing."""

    state: SelectorState
    values: Mapping[int, str | None] = field(default_factory=dict)
    failed: Mapping[int, str] = field(default_factory=dict)

    def lacking(self) -> list[int]:
        """Brokers that answered without the rack-aware selector."""
        return sorted(b for b, v in self.values.items() if v != RACK_AWARE)

    def as_json(self) -> dict[str, Any]:
        """/v1/status and ``rackplan check``: the state and, per broker, its value or its error."""
        said = {str(b): {"replica_selector_class": v} for b, v in sorted(self.values.items())}
        said.update({str(b): {"error": e} for b, e in sorted(self.failed.items())})
        return {"state": self.state, "setting": SETTING, "brokers": dict(sorted(said.items(), key=_num))}


def _num(item: tuple[str, Any]) -> int:
    return int(item[0])


def verdict(values: Mapping[int, str | None], failed: Mapping[int, str]) -> SelectorState:
    """``absent`` when any broker answered without the rack-aware selector, ``rack-aware`` when every
    broker answered with it, else ``unknown``."""
    if any(v != RACK_AWARE for v in values.values()):
        return "absent"
    return "rack-aware" if values and not failed else "unknown"


def judged_mode(fetch_mode: str, state: SelectorState | None) -> str:
    """The fetch mode a group's reads really follow: ``leader`` for a ``nearest-replica`` group when some
    broker lacks the rack-aware selector (its reads go to the leader), else the group's own."""
    return "leader" if state == "absent" else fetch_mode


@dataclass
class SelectorCheck:
    """The brokers' ``replica.selector.class``, asked at the first check and every ``replica_selector_check_s``
    (and at once for a broker not asked before); ``clock`` is a steady clock."""

    admin: AdminPort
    settings: TrafficSettings
    log: Logger
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    report: SelectorReport | None = None
    checked_at: float = -math.inf
    #: what was last logged (the state, the brokers lacking it, the errors)
    said: tuple[Any, ...] = ()

    def due(self, brokers: Collection[int]) -> bool:
        """A check is due: never checked, the interval passed, or a broker not asked before."""
        every = self.settings.replica_selector_check_s
        if every <= 0:
            return False
        r = self.report
        known = set() if r is None else set(r.values) | set(r.failed)
        return self.clock() - self.checked_at >= every or not set(brokers) <= known

    def check(self, brokers: Collection[int]) -> SelectorReport | None:
        """The verdict for ``brokers`` (live brokers of the metadata), asked again when :meth:`due`."""
        if not brokers or not self.due(brokers):
            return self.report
        self.checked_at = self.clock()
        values, failed = self._ask(sorted(brokers))
        if self.report is not None:  # a broker that does not answer now keeps its last answer
            for b in list(failed):
                if b in self.report.values:
                    values[b] = self.report.values[b]
                    del failed[b]
        self.report = SelectorReport(verdict(values, failed), values, failed)
        self._log(self.report)
        return self.report

    def _ask(self, brokers: list[int]) -> tuple[dict[int, str | None], dict[int, str]]:
        s = self.settings
        values: dict[int, str | None] = {}
        failed: dict[int, str] = {}
        delays = jittered_delays(s.replica_selector_attempts, s.backoff_initial_s, s.backoff_max_s)
        wanted = brokers
        for attempt in range(s.replica_selector_attempts):
            got = broker_setting(self.admin, wanted, SETTING, s.request_timeout_s)
            values.update(got.values)
            failed = {b: e for b, e in {**failed, **got.failed}.items() if b not in values}
            wanted = sorted(b for b, e in got.failed.items() if transient(e))
            if not wanted or attempt == len(delays):
                break
            self.sleep(delays[attempt])
        return values, failed

    def _log(self, r: SelectorReport) -> None:
        said = (r.state, tuple(r.lacking()), tuple(sorted(set(r.failed.values()))))
        if said == self.said:
            return
        self.said = said
        if r.state == "absent":
            self.log.warning(
                "brokers lack the rack-aware replica selector: consumers read from partition leaders, "
                "and nearest-replica groups are judged in leader mode",
                brokers=r.lacking(),
                values=sorted({str(r.values[b]) for b in r.lacking()}),
                fix=f"{SETTING}={RACK_AWARE} in each broker's server.properties (read-only: a rolling "
                "restart), and client.rack on the consumers",
            )
        elif r.state == "unknown":
            self.log.info(
                "cannot tell whether the brokers run the rack-aware replica selector; "
                "nearest-replica figures are not confirmed",
                brokers=sorted(r.failed),
                errors=sorted(set(r.failed.values()))[:5],
            )
        else:
            self.log.info("every broker runs the rack-aware replica selector", brokers=sorted(r.values))
