"""Who leads, as a standby agent sees it: the newest heartbeat on the lease topic.

A standby runs no cycle and holds no plans, so its ``/v1/plans`` answered ``{}``
(issue 28): an operator who reached the wrong agent learnt nothing.  While it
waits for the lease it now reads the lease topic (a :class:`TopicTail`, no
consumer group, at most once per ``poll_interval_s``: the leader's heartbeat
interval) and ``/v1/plans`` and ``/v1/status`` say who leads (agent id, epoch,
heartbeat age) and where the plans are.  The leader's answers are unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..kafka.tail import RawRecord, TopicTail
from ..protocol.lease import Heartbeat, HeartbeatError
from ..state.term import Wiring
from .lease import heartbeat_live, heartbeat_of, newest_heartbeat


class LeaseTail(Protocol):
    """The lease topic as :class:`~rackplan.agent.kafka.tail.TopicTail` reads it."""

    def read_available(self, timeout_s: float) -> tuple[list[RawRecord], bool]: ...

    def read_new(self, max_records: int = ...) -> tuple[list[RawRecord], list[str]]: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Standby:
    """What a standby's ``/v1/plans`` and ``/v1/status`` show: itself, the leader it last saw, where plans are."""

    agent_id: str
    lease_topic: str
    plan_topic: str
    #: the newest heartbeat read (None: none read yet, or the topic unreadable so far)
    leader: Heartbeat | None
    #: when the view was taken (ms since the epoch): the heartbeat's age is counted to it
    now_ms: int

    def leader_json(self) -> dict[str, Any] | None:
        hb = self.leader
        if hb is None:
            return None
        return {
            "agent_id": hb.agent_id,
            "epoch": hb.epoch,
            "heartbeat_age_s": round(max(0, hb.age_ms(self.now_ms)) / 1000, 3),
            # Its own heartbeat (it led until just now; the new leader has not written yet) says nothing
            # live: this agent stands by.
            "live": heartbeat_live(hb, self.now_ms) and hb.agent_id != self.agent_id,
            "released": hb.released,
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "role": "standby",
            "agent_id": self.agent_id,
            "leader": self.leader_json(),
            "plan_topic": self.plan_topic,
            "lease_topic": self.lease_topic,
            "hint": (
                "this agent stands by and holds no plans: the plans of record are on the plan topic "
                f"{self.plan_topic!r} (rackplan plans) and at the leader's GET /v1/plans"
            ),
        }


class LeaderWatch:
    """The newest heartbeat on the lease topic, refreshed by the standby's wait loop (one thread);
    read from the HTTP threads through :attr:`leader` (one reference, swapped whole)."""

    def __init__(
        self,
        open_tail: Callable[[], LeaseTail],
        topic: str,
        secret: bytes | None,
        every_s: float,
        timeout_s: float,
        log: Any,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._open_tail = open_tail
        self._topic = topic
        self._secret = secret
        self._every_s = every_s
        self._timeout_s = timeout_s
        self._log = log
        self._monotonic = monotonic
        self._tail: LeaseTail | None = None
        self._last: float | None = None
        self.leader: Heartbeat | None = None
        #: whether the last read reached the topic: :attr:`leader` is then as new as what the topic held
        #: (False before the first read and after a failed one, which keeps the last leader seen)
        self.current = False

    @classmethod
    def for_agent(cls, w: Wiring, client_config: Mapping[str, Any]) -> LeaderWatch:
        """The watch of an agent's lease topic: read once per heartbeat interval, each read bounded like
        a lease confirmation (the standby's wait loop also serves the lease group)."""
        s = w.settings
        timeout_s = min(s.io_timeout_s, s.ha.session_timeout_s)
        return cls(
            lambda: TopicTail(client_config, s.ha.lease_topic, timeout_s),
            s.ha.lease_topic,
            w.secret,
            s.poll_interval_s,
            timeout_s,
            w.log,
        )

    def refresh(self) -> None:
        """Read what the lease topic gained (opening it, read to its end, on first use or after an
        error), at most once per ``every_s``; an outage keeps the last heartbeat seen and is retried."""
        now = self._monotonic()
        if self._last is not None and now - self._last < self._every_s:
            return
        self._last = now
        try:
            if self._tail is None:
                self._tail = self._open_tail()
                raw, _complete = self._tail.read_available(self._timeout_s)
            else:
                raw, _errors = self._tail.read_new()
        except Exception as e:  # TopicReadError, KafkaException: the brokers' state; asked again later
            self._log.info("standby: lease topic not read; leader unknown for now", error=str(e))
            self.current = False
            self.close()
            return
        best = self.leader
        for r in raw:
            try:
                best = newest_heartbeat(best, heartbeat_of(r, self._topic, self._secret))
            except HeartbeatError:  # the leader's watch (runtime/watch.py) logs and counts these
                continue
        self.leader = best
        self.current = True

    def close(self) -> None:
        if self._tail is not None:
            tail, self._tail = self._tail, None
            tail.close()


def standby_of(w: Wiring, watch: LeaderWatch) -> Standby:
    """What this agent, standing by, shows now."""
    s = w.settings
    return Standby(w.agent_id, s.ha.lease_topic, s.plan_topic, watch.leader, int(w.clock() * 1000))
