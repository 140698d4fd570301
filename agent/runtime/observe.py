"""Observe-only mode (``mode: observe``): the agent plans, alerts and serves, and writes no record to Kafka.

An operator runs it next to (or before) an acting agent to see for a while what
it would publish.  Nothing it does may reach the followers:

* :class:`WithheldPublisher` stands in for the producer, so every path that
  would put a record on the plan topic (plan, handover target, tombstone) or a
  heartbeat on the lease topic, or an alert on the alerts topic, lands in the
  plan book as if confirmed, and nowhere else.  No real producer is made: its
  transactional id (the acting agent's, for the same settings) would fence the
  acting agent's producer.
* no heartbeat and no lease: a follower must not see a live agent that never
  publishes (it would wait for plans), and an observer must not take the lease
  an acting agent needs.
* ``/v1/plans`` marks each plan ``"published": false``, ``/v1/status`` says ``role: observer``
  (:func:`observed_status`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from ..core.ports import PlanPublisher
from ..cycle.status import StatusView
from ..metrics import declared as metric
from ..metrics.registry import Metrics
from ..settings.sections import Settings

KeyValue = tuple[str, bytes | None]


class WithheldPublisher:
    """A :class:`~rackplan.agent.core.ports.PlanPublisher` that confirms every record and sends none.

    ``withheld`` counts what would have been sent, by topic (for tests and the log).
    """

    def __init__(self) -> None:
        self.withheld: dict[str, int] = {}

    def _keep(self, topic: str, count: int) -> None:
        self.withheld[topic] = self.withheld.get(topic, 0) + count

    def publish(self, topic: str, key: str, value: bytes | None, timeout_s: float) -> None:
        self._keep(topic, 1)

    def publish_many(self, topic: str, records: list[KeyValue], timeout_s: float) -> None:
        self._keep(topic, len(records))

    def publish_each(
        self, topic: str, records: list[KeyValue], timeout_s: float
    ) -> Sequence[Exception | None]:
        self._keep(topic, len(records))
        return [None] * len(records)

    def send(self, topic: str, key: str, value: bytes, on_result: Callable[[str | None], None]) -> None:
        self._keep(topic, 1)
        on_result(None)

    def poll(self) -> None:
        return None

    def flush(self, timeout_s: float) -> int:
        return 0


@dataclasses.dataclass(frozen=True, slots=True)
class ObservedStatusView(StatusView):
    """The status of an observing agent: its plans are the ones it would publish."""

    def plans_json(self) -> dict[str, Any]:
        """/v1/plans: each plan marked ``"published": false`` (a discrepancy entry is someone else's record)."""
        out = StatusView.plans_json(self)
        for key, _rec in self.plans:
            out[key]["published"] = False
        return out

    def status_json(self) -> dict[str, Any]:
        """/v1/status: the leader's answer with ``role: observer``; it leads nothing (``rackplan_leader`` 0),
        and next to the acting agent two answers said ``leader``."""
        return {**StatusView.status_json(self), "role": "observer"}


def observed_status(view: StatusView) -> ObservedStatusView:
    """``view`` as an observing agent shows it."""
    return ObservedStatusView(**{f.name: getattr(view, f.name) for f in dataclasses.fields(view)})


def shown(view: StatusView, observing: bool) -> StatusView:
    """The view the agent serves: an observer's plans marked unpublished."""
    return observed_status(view) if observing else view


def publisher_for(s: Settings, metrics: Metrics, publisher: PlanPublisher | None) -> PlanPublisher | None:
    """What the agent publishes through: ``publisher`` (None: the real producer, made at start-up), or in
    observe mode a :class:`WithheldPublisher` whatever was given; ``rackplan_observe_only`` says which."""
    observing = s.mode == "observe"
    metrics.set(metric.OBSERVE_ONLY, 1 if observing else 0)
    return WithheldPublisher() if observing else publisher
