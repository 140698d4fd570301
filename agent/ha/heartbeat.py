"""The leader's heartbeat on the lease topic: followers tell a live agent from a gone one by it.

Heartbeats go out on a schedule of their own (a thread, one every
``poll_interval_s``), not after each cycle: a cycle that waits (a publish on a
slow transaction coordinator, DescribeGroups to a dead coordinator, slow
planning) must not make followers think the agent gone (issue 24: lease-topic
gaps of 20-60 s with the leader alive, every follower falling back and back).
Each heartbeat is still guarded by the lease (``Wiring.guard``: a commit as
the lease holder), so an agent that lost the lease never heartbeats it.  A
cycle stuck past ``ha.max_cycle_s`` pauses them: a hung loop must look dead.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..kafka.exceptions import PublishError
from ..metrics import declared as metric
from ..protocol.lease import HEARTBEAT_KEY, Heartbeat
from ..state.term import Wiring
from .lease import LeaseLost, LeaseUnconfirmed


class Heartbeats:
    """Sends heartbeats (never waited for) on their own thread and, at a clean stop, the released one (waited for)."""

    def __init__(self, w: Wiring, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.w = w
        #: the lease topic exists (known once start-up looked): heartbeats are published there
        self.topic_ok = False
        #: why the schedule found the lease lost (the loop steps down at its next check), None while held
        self.lost: str | None = None
        self._failing = False
        self._monotonic = monotonic
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        #: when the cycle in progress started (``monotonic``), None between cycles
        self._cycle_since: float | None = None
        self._stuck = False
        #: beats skipped because a cycle ran past ``ha.max_cycle_s`` (tests count them)
        self.paused = 0

    def _heartbeat(self, released: bool = False) -> Heartbeat:
        w = self.w
        now_ms = int(w.clock() * 1000)
        return Heartbeat(
            w.agent_id, w.epoch, now_ms, w.settings.poll_interval_s, w.lease_group, released=released
        )

    def send(self, replayed: bool) -> None:
        """One heartbeat, once the plan topic was replayed; a broker outage must not stall the sender.

        :class:`LeaseLost` when the guard finds the lease gone: nothing is sent.
        """
        w = self.w
        publisher = w.publisher
        if not self.topic_ok or publisher is None or not replayed:
            return
        hb = self._heartbeat()
        try:
            w.guard()
        except LeaseUnconfirmed as e:
            w.log.warning("heartbeat not published: lease not confirmed", error=str(e))
            return
        # Never waited for: a lost heartbeat is followed by the next.
        publisher.send(w.settings.ha.lease_topic, HEARTBEAT_KEY.decode(), hb.encode(), self._result)

    # ---- the schedule ---------------------------------------------------------------

    def start(self, replayed: Callable[[], bool]) -> None:
        """Heartbeat now and every ``poll_interval_s`` on a thread of its own, until :meth:`stop`."""
        if self._thread is not None:
            return
        self._halt.clear()
        self.lost = None
        self._cycle_since = None
        self._thread = threading.Thread(
            target=self._run, args=(replayed,), name="rackplan-heartbeat", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float) -> None:
        """End the schedule; waits for a heartbeat being sent (its lease check is bounded by the I/O timeout)."""
        self._halt.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    @contextmanager
    def cycle(self) -> Iterator[None]:
        """Around one cycle: a cycle running past ``ha.max_cycle_s`` pauses the heartbeats until it ends."""
        self._cycle_since = self._monotonic()
        try:
            yield
        finally:
            self._cycle_since = None

    def _run(self, replayed: Callable[[], bool]) -> None:
        interval = self.w.settings.poll_interval_s
        while not self._halt.is_set():
            try:
                self._beat(replayed)
            except LeaseLost as e:
                self.lost = str(e)
                self.w.log.warning("heartbeats stopped: the lease is lost", reason=self.lost)
                return
            except Exception as e:  # never let the schedule die: the next beat tries again
                self.w.log.error("heartbeat failed", error=repr(e), exc_info=True)
            self._halt.wait(interval)

    def _beat(self, replayed: Callable[[], bool]) -> None:
        since, limit = self._cycle_since, self.w.settings.ha.max_cycle_s
        if since is not None and self._monotonic() - since > limit:
            if not self._stuck:
                self.w.log.error(
                    "a cycle runs past ha.max_cycle_s: heartbeats paused until it ends, so followers can "
                    "tell a stuck agent from a live one",
                    running_s=round(self._monotonic() - since, 1),
                    max_cycle_s=limit,
                )
            self._stuck = True
            self.paused += 1
            return
        self._stuck = False
        self.send(replayed())

    # ---- the last one --------------------------------------------------------------

    def release(self, replayed: bool) -> None:
        """A clean stop's last heartbeat: a successor with other settings need not wait for ours to age."""
        w = self.w
        if w.publisher is None or not replayed:
            return
        s = w.settings
        try:
            w.publisher.publish(
                s.ha.lease_topic, HEARTBEAT_KEY.decode(), self._heartbeat(True).encode(), s.io_timeout_s
            )
        except PublishError as e:
            w.log.warning("released heartbeat not delivered", error=str(e))

    def _result(self, error: str | None) -> None:
        if error is not None:
            self.w.metrics.inc(metric.PUBLISH_FAILURES_TOTAL, {"record": "heartbeat"})
            if not self._failing:
                self.w.log.warning("heartbeat not delivered", error=error)
        self._failing = error is not None
