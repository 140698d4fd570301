"""The leader's heartbeat on the lease topic: followers tell a live agent from a gone one by it."""

from __future__ import annotations

from .kafka_io import PublishError
from .lease import LeaseUnconfirmed
from .protocol.lease import HEARTBEAT_KEY, Heartbeat
from .state import Wiring


class Heartbeats:
    """Sends heartbeats (never waited for) and, at a clean stop, the released one (waited for)."""

    def __init__(self, w: Wiring) -> None:
        self.w = w
        #: the lease topic exists (known once start-up looked): heartbeats are published there
        self.topic_ok = False
        self._failing = False

    def _heartbeat(self, released: bool = False) -> Heartbeat:
        w = self.w
        now_ms = int(w.clock() * 1000)
        return Heartbeat(
            w.agent_id, w.epoch, now_ms, w.settings.poll_interval_s, w.lease_group, released=released
        )

    def send(self, replayed: bool) -> None:
        """One heartbeat, once the plan topic was replayed; a broker outage must not stall the loop."""
        w = self.w
        if not self.topic_ok or w.publisher is None or not replayed:
            return
        hb = self._heartbeat()
        try:
            w.guard()
        except LeaseUnconfirmed as e:
            w.log.warning("heartbeat not published: lease not confirmed", error=str(e))
            return
        # Never waited for: a lost heartbeat is followed by the next.
        w.publisher.send(w.settings.ha.lease_topic, HEARTBEAT_KEY.decode(), hb.encode(), self._result)

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
            self.w.metrics.inc("rackplan_publish_failures_total", {"record": "heartbeat"})
            if not self._failing:
                self.w.log.warning("heartbeat not delivered", error=error)
        self._failing = error is not None
