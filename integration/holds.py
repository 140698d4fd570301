"""Holds a test can put on real clients, to force an order of events that otherwise only load produces.

* :class:`HeldProducer`: a follower's registration producer whose records, while held, never reach
  the brokers and are never answered (a broker that does not confirm): the follower fences itself
  at 2/3 of its TTL and the agent expires it at the TTL.
* :class:`LaggingTail`: a follower's control-topic tail whose incremental reads see nothing while
  held (a fetch backing off through an outage), while its reads to the end still see everything.
* :class:`PlanGate`: the agent's publisher, holding back a plan of a group until the test releases
  it: an agent cycle that decided a plan but is slow to publish it (one that spans a broker outage
  takes seconds), or the agent's next plan held while followers act on the one before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from rackplan.agent.core.ports import ControlTail, DeliveryCallback, FollowerProducer, KeyValue, PlanPublisher
from rackplan.agent.protocol.plans import PlanRecord, decode_record


class HeldProducer:
    """A :class:`FollowerProducer` whose records are dropped unanswered while ``held`` is set."""

    def __init__(self, inner: FollowerProducer, held: threading.Event) -> None:
        self.inner, self.held = inner, held

    def produce(
        self, topic: str, *, key: bytes, value: bytes | None, on_delivery: DeliveryCallback | None = None
    ) -> None:
        if self.held.is_set():
            return
        self.inner.produce(topic, key=key, value=value, on_delivery=on_delivery)

    def poll(self, timeout: float = 0.0) -> int:
        return self.inner.poll(timeout)

    def flush(self, timeout: float = 10.0) -> int:
        return self.inner.flush(timeout)

    def purge(self) -> None:
        self.inner.purge()


class LaggingTail:
    """A :class:`ControlTail` whose :meth:`read_new` returns nothing while ``lagging`` is set; what it
    skipped stays in the topics, so :meth:`read_available` (a read to the end) still returns it."""

    def __init__(self, inner: ControlTail, lagging: threading.Event) -> None:
        self.inner, self.lagging = inner, lagging

    @property
    def topics(self) -> tuple[str, ...]:
        return self.inner.topics

    def read_available(self, timeout_s: float) -> tuple[list[Any], bool]:
        return self.inner.read_available(timeout_s)

    def read_new(self) -> tuple[list[Any], list[str]]:
        if self.lagging.is_set():
            return [], []
        return self.inner.read_new()

    def close(self) -> None:
        self.inner.close()


class PlanGate:
    """A :class:`PlanPublisher` holding back plans of one group's ``key``, as the test asks.

    :meth:`release` lets every plan held so far go, and names which plan of ``key`` to hold next (if
    any): the first one whose record ``hold_next`` accepts.  :attr:`held` lists the generations held
    back, in order.  A plan is held at most ``hold_max_s``, so that a failing test still ends.
    """

    def __init__(self, inner: PlanPublisher, plan_topic: str, key: str, hold_max_s: float = 30.0) -> None:
        self.inner, self.plan_topic, self.key = inner, plan_topic, key
        self.hold_max_s = hold_max_s
        self.held: list[int] = []
        self._released = 0
        self._hold_next: Callable[[PlanRecord], bool] | None = None
        self._cv = threading.Condition()

    def release(self, hold_next: Callable[[PlanRecord], bool] | None = None) -> None:
        with self._cv:
            self._released = len(self.held)
            self._hold_next = hold_next
            self._cv.notify_all()

    def wait_held(self, count: int, timeout_s: float) -> bool:
        """Whether ``count`` plans have been held back within ``timeout_s``."""
        with self._cv:
            return self._cv.wait_for(lambda: len(self.held) >= count, timeout_s)

    def _held_now(self, records: list[KeyValue]) -> int:
        """The number of this hold, when ``records`` hold the plan to hold next; else 0 (under the lock)."""
        for key, value in records:
            if key != self.key or value is None or self._hold_next is None:
                continue
            rec = decode_record(key, value)
            if rec is not None and self._hold_next(rec):
                self._hold_next = None
                self.held.append(rec.generation)
                self._cv.notify_all()
                return len(self.held)
        return 0

    def publish_each(
        self, topic: str, records: list[KeyValue], timeout_s: float
    ) -> Sequence[Exception | None]:
        if topic == self.plan_topic:
            with self._cv:
                n = self._held_now(records)
                if n:
                    self._cv.wait_for(lambda: self._released >= n, self.hold_max_s)
        return self.inner.publish_each(topic, records, timeout_s)

    def publish(self, topic: str, key: str, value: bytes | None, timeout_s: float) -> None:
        self.inner.publish(topic, key, value, timeout_s)

    def publish_many(self, topic: str, records: list[KeyValue], timeout_s: float) -> None:
        self.inner.publish_many(topic, records, timeout_s)

    def send(self, topic: str, key: str, value: bytes, on_result: Callable[[str | None], None]) -> None:
        self.inner.send(topic, key, value, on_result)

    def poll(self) -> None:
        self.inner.poll()

    def flush(self, timeout_s: float) -> int:
        return self.inner.flush(timeout_s)

    def __getattr__(self, name: str) -> Any:
        """Anything else the agent asks of its real publisher (closing it, its transaction state)."""
        return getattr(self.inner, name)
