"""A cycle waits a bounded time for a coordinator-targeted call; a call that overruns goes on in the background.

Why: a group whose coordinator just died answers nothing until the controller fences that broker and
the coordinator moves, so the first DescribeGroups or ListConsumerGroupOffsets of it waits for its
whole request timeout (plus the operation's grace: 15 s and 5 s by default).  :class:`~.isolated_admin.Cooldown`
keeps later calls from paying it again, but that first call still held its cycle, and the plans
computed in it (a broker death's leader moves among them) went out that much later (the broker-kill
scenario on real Kafka: leaders' move planned 15.7-20.6 s after the kill, most of it one such wait).

How: each call runs on a thread of its own, and the cycle waits at most :data:`WAIT_S` for it
(plus :data:`~.isolated_admin.START_S` when the call must first start the child).  A call that overruns
is answered at once, group by group, with ``_IN_PROGRESS`` ("no answer within 3 s; the call goes
on"), which callers take as "judge this group on its plan of record" and "wait for the next sample".
It is not a timeout: one batch holds many groups, and the others' coordinators may be alive, so the
cooldown pauses none of them for it.  The call goes on; while it runs, further calls are answered the
same way at once (the child takes one request at a time), and the groups of further describes are
queued: the call's thread asks them in turn once it is done, so no batch starves behind one that
always overruns.  What these calls bring back answers the next call of those groups that overruns or
finds the child busy, if at most :data:`MAX_LATE_S` old: a real timeout then reaches the cooldown,
which pauses that group alone, and a slow but live coordinator's groups are still described, one call
late, instead of never.  Late committed offsets are not used and not queued (their errors are used):
a read rate divides offsets by the time they were read at, and a late answer would be read as now's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Per group: (True, its answer) or (False, the exception to raise), as the describe worker answers.
Answers = dict[str, tuple[bool, Any]]
#: A worker's call: the groups and the request timeout in, the answers out.
Call = Callable[[list[str], float], Answers]

#: longest wait of a cycle for one coordinator-targeted call (never longer than the call's own timeout)
WAIT_S = 3.0
#: a late description is used only this long after it arrived
MAX_LATE_S = 60.0


@dataclass
class _Running:
    """One call on its thread: what it asks, and its answers once it ends."""

    op: str
    group_ids: list[str]
    keep_late: bool
    ended: threading.Event = field(default_factory=threading.Event)
    answers: Answers | None = None
    overran: bool = False


class BoundedWait:
    """The worker's calls, each waited for at most :data:`WAIT_S` (see the module docstring)."""

    def __init__(
        self,
        starting: Callable[[], bool] = lambda: False,
        start_s: float = 0.0,
        wait_s: float = WAIT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        #: whether the next call must start the child first (it is then given ``start_s`` more)
        self.starting = starting
        self.start_s = start_s
        self.wait_s = wait_s
        self.clock = clock
        self._asking = threading.Lock()  # one caller at a time, as the child takes one request at a time
        self._lock = threading.Lock()  # the running call's fields and the late answers
        self._running: _Running | None = None
        #: per op, the call and groups asked while the child was busy (describes only), asked in turn by the
        #: running call's thread; never empty while nothing runs
        self._queued: dict[str, tuple[Call, set[str], float]] = {}
        self._closed = False
        #: (op, group) -> (when it arrived, its answer), from a call that overran (not kept: late successes
        #: of an op asked with ``keep_late`` False)
        self._late: dict[tuple[str, str], tuple[float, tuple[bool, Any]]] = {}

    def ask(self, op: str, call: Call, group_ids: list[str], timeout: float, keep_late: bool) -> Answers:
        """``call``'s answers if it ends within the wait, else at once the late ones or ``_IN_PROGRESS`` per group."""
        with self._asking:
            with self._lock:  # busy, and queued, at one look: the running call may end meanwhile
                busy = self._running is not None or self._closed
                if busy and keep_late and not self._closed:
                    queued = self._queued.get(op, (call, set(), timeout))[1]
                    self._queued[op] = (call, queued | set(group_ids), timeout)
            if busy:
                return self._instead(op, group_ids, "an earlier call to the coordinators still runs")
            wait = min(self.wait_s, timeout) + (self.start_s if self.starting() else 0.0)
            run = _Running(op, list(group_ids), keep_late)
            with self._lock:
                self._running = run
            threading.Thread(
                target=self._run, args=(run, call, timeout), name="rackplan-coordinator-call", daemon=True
            ).start()
            run.ended.wait(wait)
            with self._lock:
                if run.answers is not None:
                    for g in group_ids:
                        self._late.pop((op, g), None)
                    return run.answers
                run.overran = True
            return self._instead(op, group_ids, f"no answer within {wait:.0f} s; the call goes on")

    def _run(self, run: _Running, call: Call, timeout: float) -> None:
        """The call, then each queued one in turn (their answers kept as late ones), on this thread."""
        while True:
            try:
                answers = call(run.group_ids, timeout)
            except (
                Exception
            ) as e:  # the worker answers errors itself; anything else is this call's answer too
                answers = dict.fromkeys(run.group_ids, (False, e))
            with self._lock:
                run.answers = answers
                if run.overran:
                    self._keep_late(run, answers)
                nxt = None if self._closed or not self._queued else self._queued.popitem()
                if nxt is not None:
                    op, (call, groups, timeout) = nxt
                    self._running = _Running(op, sorted(groups), True, overran=True)
                else:
                    self._running = None
                    self._queued.clear()
                following = self._running
            run.ended.set()
            if following is None:
                return
            run = following

    def _keep_late(self, run: _Running, answers: Answers) -> None:
        """Keep an overrun's answers for the next calls (under the lock)."""
        now = self.clock()
        self._late = {k: v for k, v in self._late.items() if now - v[0] <= MAX_LATE_S}
        for g, answer in answers.items():
            if run.keep_late or not answer[0]:
                self._late[(run.op, g)] = (now, answer)

    def _instead(self, op: str, group_ids: list[str], why: str) -> Answers:
        """Per group: its late answer when fresh enough, else ``_IN_PROGRESS`` saying ``why``."""
        from confluent_kafka import KafkaError, KafkaException

        now = self.clock()
        out: Answers = {}
        with self._lock:
            for g in group_ids:
                late = self._late.pop((op, g), None)
                if late is not None and now - late[0] <= MAX_LATE_S:
                    out[g] = late[1]
                else:
                    out[g] = (False, KafkaException(KafkaError(KafkaError._IN_PROGRESS, why)))
        return out

    def close(self) -> None:
        """Nothing more is sent: the queue is dropped, and later calls are answered at once."""
        with self._lock:
            self._closed = True
            self._queued.clear()

    def running(self) -> bool:
        """Whether a call that overran still runs (the worker is busy with it)."""
        with self._lock:
            return self._running is not None
