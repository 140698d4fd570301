"""DescribeGroups from a child process: librdkafka's abort on a broker fault stays out of the agent.

librdkafka up to 2.16 (bundled by confluent-kafka 2.16.1, the newest on PyPI) aborts the whole process from a
*coordinator-targeted* Admin operation (DescribeConsumerGroups, ListConsumerGroupOffsets,
DeleteConsumerGroupOffsets, ...) whose request cannot be sent to the group coordinator as that broker goes
down or comes back: the error path of ``rd_kafka_admin_coord_request`` frees the operation's enq-once object
while ``rd_kafka_coord_req_fsm`` still holds it, and the dummy error response then trips
``rd_kafka_enq_once_del_source_return: Assertion `eonce->refcnt > 0'`` (confluentinc/librdkafka#4605, #3663;
the fix, #5397, is in no release). Python cannot catch an abort. ``describe_consumer_groups`` and
``list_consumer_group_offsets`` (a group's read rate, :mod:`.group_offsets`) are the agent's Admin calls on
that path: Metadata, DescribeCluster, DescribeConfigs, ListOffsets and CreateTopics go to any broker, a
partition leader or the controller, and never reach that code. (The read rate's first version called
ListConsumerGroupOffsets from the agent itself, and a 30-minute soak with broker churn aborted the agent
within a minute.)

So the agent's DescribeGroups and ListConsumerGroupOffsets run in a child process with an AdminClient of its
own (kept between calls; started on first use). When the bug aborts the child, only the groups of that call
fail (reason ``DescribeWorkerDied``: the agent judges them on their plans of record for that cycle, as after
any DescribeGroups failure), the death is logged with its signal, and the next call starts a new child (after
1, 2, 4 ... 60 s while it keeps dying). Descriptions cross the pipe as confluent-kafka's own objects
(``ConsumerGroupDescription``), so callers see no difference.
"""

from __future__ import annotations

import copyreg
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from multiprocessing.connection import Connection
from typing import Any

from ..core.errors import AgentError
from ..core.logging import log_fd
from ..core.ports import AdminPort, Logger
from .bounded_wait import BoundedWait
from .errors import timed_out
from .timeouts import OPERATION_GRACE_S

#: seconds a new child may take to import confluent-kafka and answer
START_S = 20.0
#: longest pause before starting a child again after deaths in a row
MAX_BACKOFF_S = 60.0
#: the child's operations: DescribeConsumerGroups, ListConsumerGroupOffsets (one group per request)
DESCRIBE = "describe"
OFFSETS = "offsets"
#: a group whose coordinator-targeted call timed out is not asked again for this long, doubling while it
#: keeps timing out, up to :data:`COOL_MAX_S` (see :class:`Cooldown`)
COOL_BASE_S = 5.0
COOL_MAX_S = 60.0


class DescribeWorkerDied(AgentError, RuntimeError):
    """The child process describing groups died (librdkafka#4605's abort) or is being started again."""


# ---- confluent-kafka's C types across the pipe (they do not pickle by themselves) ----------------------


def _topic_partition(topic: str, partition: int, offset: int) -> Any:
    from confluent_kafka import TopicPartition

    return TopicPartition(topic, partition, offset)


def _kafka_error(code: int, reason: str, fatal: bool, retriable: bool, txn_requires_abort: bool) -> Any:
    from confluent_kafka import KafkaError

    return KafkaError(code, reason, fatal, retriable, txn_requires_abort)


def _kafka_exception(error: Any) -> Any:
    from confluent_kafka import KafkaException

    return KafkaException(error)


def _register_reducers() -> None:
    """Teach pickle confluent-kafka's C types (done in the child, which sends them)."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    copyreg.pickle(TopicPartition, lambda tp: (_topic_partition, (tp.topic, tp.partition, tp.offset)))
    copyreg.pickle(
        KafkaError,
        lambda e: (_kafka_error, (e.code(), e.str(), e.fatal(), e.retriable(), e.txn_requires_abort())),
    )
    copyreg.pickle(KafkaException, lambda e: (_kafka_exception, (e.args[0] if e.args else None,)))


# ---- the parent's side -------------------------------------------------------------------------------


def signal_name(returncode: int | None) -> str:
    """``SIGABRT`` for -6, ``exit 1`` for 1."""
    if returncode is None:
        return "running"
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit {returncode}"


class GroupDescribeWorker:
    """The child process that runs the agent's coordinator-targeted Admin calls (``describe_consumer_groups``,
    ``list_consumer_group_offsets``); one call at a time."""

    def __init__(
        self,
        client_config: Mapping[str, Any],
        log: Logger,
        *,
        log_format: str = "json",
        log_level: str = "warning",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client_config = dict(client_config)
        self.log = log
        self.log_format = log_format
        self.log_level = log_level
        self.clock = clock
        self.deaths = 0
        #: every death seen (signal names), for the caller's counts
        self.died: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._not_before = 0.0
        self._lock = threading.Lock()
        self._closing = False  # close() ends a running call's child: not a death worth an error

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> Connection:
        # No PR_SET_PDEATHSIG: it follows the forking thread, not the agent. The child ends when it reads
        # EOF instead, which the kernel gives it as soon as the agent's process is gone.  A session of its
        # own: a terminal's Ctrl-C (SIGINT to the foreground group) is the agent's to handle, not the child's.
        ours, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "rackplan.agent.kafka.isolated_admin", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=log_fd(),  # the child logs where the agent logs (None: the agent's stdout)
            )
        finally:
            theirs.close()
        conn = Connection(ours.detach())
        conn.send((self.client_config, self.log_format, self.log_level))
        self._conn = conn
        return conn

    def _reap(self, why: str) -> str:
        """The child is gone or useless: kill it, note how it ended."""
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if conn is not None:
            conn.close()
        how = "unknown"
        if proc is not None:
            if proc.poll() is None and why != "died":
                proc.kill()
            how = signal_name(_waited(proc))
        self.deaths += 1
        self.died.append(how)
        self._not_before = self.clock() + min(MAX_BACKOFF_S, 2.0 ** (self.deaths - 1))
        (self.log.info if self._closing else self.log.error)(
            "describe worker ended; its groups are judged on their plans of record this cycle",
            how=how,
            why=why,
            restart_in_s=round(self._not_before - self.clock(), 1),
            hint="SIGABRT during a broker fault is librdkafka#4605 (coordinator Admin requests), "
            "kept out of the agent by this child process",
        )
        return how

    def describe(self, group_ids: list[str], request_timeout_s: float) -> dict[str, tuple[bool, Any]]:
        """Per group: (True, its ``ConsumerGroupDescription``) or (False, the exception to raise)."""
        return self._ask(DESCRIBE, group_ids, request_timeout_s)

    def committed(self, group_ids: list[str], request_timeout_s: float) -> dict[str, tuple[bool, Any]]:
        """Per group: (True, its committed offsets as ``[(topic, partition, offset)]``) or (False, the exception)."""
        return self._ask(OFFSETS, group_ids, request_timeout_s)

    def _ask(self, op: str, group_ids: list[str], request_timeout_s: float) -> dict[str, tuple[bool, Any]]:
        with self._lock:
            if self._closing or (self._conn is None and self.clock() < self._not_before):
                err = DescribeWorkerDied(
                    f"describe worker restarting in {self._not_before - self.clock():.0f} s "
                    f"(it ended: {self.died[-1] if self.died else 'unknown'})"
                    if not self._closing
                    else "describe worker closed"
                )
                return dict.fromkeys(group_ids, (False, err))
            wait_s = request_timeout_s + 2 * OPERATION_GRACE_S
            try:
                conn = self._conn
                if conn is None:
                    conn = self._start()
                    wait_s += START_S
                conn.send((op, list(group_ids), request_timeout_s))
                if not conn.poll(wait_s):
                    how = self._reap("no answer")
                    return dict.fromkeys(
                        group_ids, (False, DescribeWorkerDied(f"describe worker did not answer ({how})"))
                    )
                answer: dict[str, tuple[bool, Any]] = conn.recv()
            except (EOFError, OSError):
                how = self._reap("died")
                return dict.fromkeys(group_ids, (False, DescribeWorkerDied(f"describe worker ended ({how})")))
            except Exception as e:  # an answer that does not unpickle: this child is of no use
                how = self._reap(f"bad answer: {type(e).__name__}: {e}")
                return dict.fromkeys(group_ids, (False, DescribeWorkerDied(f"describe worker ended ({how})")))
            self.deaths = 0
            return answer

    def close(self) -> None:
        self._closing = True
        if not self._lock.acquire(timeout=0.5):  # a call that overran its wait still runs: end its child
            if (running := self._proc) is not None:
                running.kill()
            self._lock.acquire()
        try:
            proc, conn = self._proc, self._conn
            self._proc = self._conn = None
            if conn is not None:
                conn.close()  # the child reads EOF and exits
            if proc is not None:
                _waited(proc)
        finally:
            self._lock.release()


def _waited(proc: subprocess.Popen[bytes]) -> int:
    """The child's return code once it ended: 10 s to end by itself, then killed."""
    try:
        return proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(timeout=10)


class Cooldown:
    """Groups whose coordinator timed out, not asked again for a while: one timeout per group and period.

    Why: a group's coordinator on a broker that just died answers nothing until the controller fences
    that broker and the coordinator moves; meanwhile every DescribeGroups and ListConsumerGroupOffsets
    for the group waits for its whole request timeout, one after the other, inside the cycle.  On the
    real cluster a broker kill made the agent's cycles 25-50 s long (the read rate's 10 s, then the
    description's 15 s, per group), so the leader moves it exists to see were planned a minute late
    (CI: 2 of 5 runs).  A cooling group's calls fail at once with the timeout they would have ended in,
    which the callers already take as "use the plan of record" and "wait for the next sample".  Both
    operations share the cooling: they go to the same coordinator.  And for :data:`COOL_BASE_S` after
    any timeout no group is asked: several groups on one dead coordinator would otherwise cost a cycle
    one timeout each (CI: a 45 s cycle with the per-group pause alone).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        #: group id -> (asked again from, the current period)
        self._until: dict[str, tuple[float, float]] = {}
        #: no group is asked before this (the last timeout + COOL_BASE_S)
        self._all_until = 0.0

    def left(self, group_id: str) -> float | None:
        """Seconds until the group is asked again, or None when it may be asked now."""
        now = self.clock()
        mine = self._until.get(group_id, (0.0, 0.0))[0]
        left = max(mine, self._all_until) - now
        return left if left > 0 else None

    def note(self, group_id: str, ok: bool, value: Any) -> None:
        """A call's answer for the group: a coordinator timeout starts (or doubles) its period, anything
        else ends it."""
        if ok or not timed_out(value):
            self._until.pop(group_id, None)
            return
        period = min(COOL_MAX_S, max(COOL_BASE_S, 2 * self._until.get(group_id, (0.0, 0.0))[1]))
        self._until[group_id] = (self.clock() + period, period)
        self._all_until = self.clock() + COOL_BASE_S

    def ask(
        self,
        ask: Callable[[list[str], float], dict[str, tuple[bool, Any]]],
        group_ids: list[str],
        timeout: float,
    ) -> dict[str, tuple[bool, Any]]:
        """``ask`` (the worker's) for the groups not cooling; each cooling one answered at once with a
        coordinator timeout that says when it is asked again."""
        from confluent_kafka import KafkaError, KafkaException

        waiting = {g: self.left(g) for g in group_ids}
        asked = [g for g in group_ids if waiting[g] is None]
        got = ask(asked, timeout) if asked else {}
        for g in asked:
            self.note(g, *got[g])
        out: dict[str, tuple[bool, Any]] = {}
        for g in group_ids:
            left = waiting[g]
            if left is None:
                out[g] = got[g]
                continue
            # the same words for the whole period: callers log an error once per distinct text
            period = self._until.get(g, (0.0, COOL_BASE_S))[1]
            why = f"not asked: the group's coordinator timed out lately; asked again within {period:.0f} s"
            out[g] = (False, KafkaException(KafkaError(KafkaError._TIMED_OUT, why)))
        return out


class IsolatedGroupsAdmin:
    """An :class:`~rackplan.agent.core.ports.AdminPort`: the AdminClient's calls, but the coordinator-targeted
    ones (DescribeGroups, ListConsumerGroupOffsets) in a child, each waited for a bounded time
    (:class:`~.bounded_wait.BoundedWait`), a group whose coordinator timed out not asked again for a
    while (:class:`Cooldown`)."""

    def __init__(
        self,
        admin: AdminPort,
        worker: GroupDescribeWorker,
        cooldown: Cooldown | None = None,
        waits: BoundedWait | None = None,
    ) -> None:
        self.admin = admin
        self.worker = worker
        self.cooldown = Cooldown() if cooldown is None else cooldown
        self.waits = BoundedWait(lambda: worker.pid is None, START_S) if waits is None else waits

    def _describe(self, group_ids: list[str], timeout: float) -> dict[str, tuple[bool, Any]]:
        return self.waits.ask(DESCRIBE, self.worker.describe, group_ids, timeout, keep_late=True)

    def _committed(self, group_ids: list[str], timeout: float) -> dict[str, tuple[bool, Any]]:
        return self.waits.ask(OFFSETS, self.worker.committed, group_ids, timeout, keep_late=False)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        return self.admin.list_topics(topic, timeout=timeout)

    def describe_cluster(self, **kwargs: Any) -> Future[Any]:
        return self.admin.describe_cluster(**kwargs)

    def describe_configs(self, resources: list[Any], **kwargs: Any) -> dict[Any, Future[Any]]:
        return self.admin.describe_configs(resources, **kwargs)

    def create_topics(self, new_topics: list[Any], **kwargs: Any) -> dict[str, Future[Any]]:
        return self.admin.create_topics(new_topics, **kwargs)

    def list_offsets(self, topic_partition_offsets: dict[Any, Any], **kwargs: Any) -> dict[Any, Future[Any]]:
        return self.admin.list_offsets(topic_partition_offsets, **kwargs)

    def list_consumer_group_offsets(self, requests: list[Any], **kwargs: Any) -> dict[str, Future[Any]]:
        """Every group's committed offsets, asked by the child (module docstring); done when it returns.

        Each future's result is a ``ConsumerGroupTopicPartitions`` holding the partitions the group
        committed (partitions the broker answered with an error are left out)."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        timeout = float(kwargs.get("request_timeout", 30.0))
        group_ids = [str(r.group_id) for r in requests]
        out: dict[str, Future[Any]] = {}
        for gid, (ok, value) in self.cooldown.ask(self._committed, group_ids, timeout).items():
            f: Future[Any] = Future()
            if ok:
                f.set_result(
                    ConsumerGroupTopicPartitions(gid, [TopicPartition(t, p, o) for t, p, o in value])
                )
            else:
                f.set_exception(value)
            out[gid] = f
        return out

    def describe_consumer_groups(self, group_ids: list[str], **kwargs: Any) -> dict[str, Future[Any]]:
        """Done when it returns (the child answered, ended, or overran its wait): every future is resolved."""
        timeout = float(kwargs.get("request_timeout", 30.0))
        out: dict[str, Future[Any]] = {}
        for gid, (ok, value) in self.cooldown.ask(self._describe, list(group_ids), timeout).items():
            f: Future[Any] = Future()
            if ok:
                f.set_result(value)
            else:
                f.set_exception(value)
            out[gid] = f
        return out

    def poll(self, timeout: float = 0) -> int:
        poll = getattr(self.admin, "poll", None)
        return int(poll(timeout)) if callable(poll) else 0

    def close(self) -> None:
        self.waits.close()
        self.worker.close()


def isolated_admin(
    client_config: Mapping[str, Any], log: Logger, *, log_format: str, log_level: str
) -> IsolatedGroupsAdmin:
    """The agent's AdminClient (``client_config``, librdkafka's lines through structlog) and its describe worker."""
    from confluent_kafka.admin import AdminClient

    from ..core.logging import with_kafka_logger

    admin: AdminPort = AdminClient(with_kafka_logger(dict(client_config)))
    worker = GroupDescribeWorker(client_config, log, log_format=log_format, log_level=log_level)
    return IsolatedGroupsAdmin(admin, worker)


# ---- the child's side --------------------------------------------------------------------------------


def _describe(admin: Any, group_ids: list[str], request_timeout_s: float) -> dict[str, tuple[bool, Any]]:
    out: dict[str, tuple[bool, Any]] = {}
    try:
        futures = admin.describe_consumer_groups(group_ids, request_timeout=request_timeout_s)
    except Exception as e:
        return dict.fromkeys(group_ids, (False, e))
    for gid in group_ids:
        try:
            out[gid] = (True, futures[gid].result(timeout=request_timeout_s + OPERATION_GRACE_S))
        except Exception as e:
            out[gid] = (False, e)
    return out


def _committed(admin: Any, group_ids: list[str], request_timeout_s: float) -> dict[str, tuple[bool, Any]]:
    """ListConsumerGroupOffsets of each group (one request each: the API takes one group), as plain
    ``(topic, partition, offset)`` triples of the partitions committed without an error."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    out: dict[str, tuple[bool, Any]] = {}
    for gid in group_ids:
        try:
            futures = admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(gid)], request_timeout=request_timeout_s
            )
            answer = futures[gid].result(timeout=request_timeout_s + OPERATION_GRACE_S)
            parts = [
                (str(tp.topic), int(tp.partition), int(tp.offset))
                for tp in answer.topic_partitions or []
                if getattr(tp, "error", None) is None
            ]
            out[gid] = (True, parts)
        except Exception as e:
            out[gid] = (False, e)
    return out


def _sendable(answer: dict[str, tuple[bool, Any]]) -> dict[str, tuple[bool, Any]]:
    """``answer`` with anything pickle refuses replaced by a plain error naming it."""
    out = {}
    for gid, (ok, value) in answer.items():
        try:
            pickle.dumps(value)
            out[gid] = (ok, value)
        except Exception as e:
            out[gid] = (False, DescribeWorkerDied(f"{type(value).__name__} not sendable: {e}"))
    return out


def child_main(fd: int) -> int:
    """The child: one AdminClient, one request at a time, until the agent closes its end (SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the agent stops on it, then closes our end: EOF
    from confluent_kafka.admin import AdminClient

    from ..core.logging import configure, with_kafka_logger

    _register_reducers()
    conn = Connection(fd)
    try:
        client_config, log_format, log_level = conn.recv()
    except EOFError:
        return 0
    configure(log_format, log_level)
    admin = AdminClient(with_kafka_logger(client_config))
    while True:
        try:
            op, group_ids, request_timeout_s = conn.recv()
        except (EOFError, OSError):
            return 0
        ask = _committed if op == OFFSETS else _describe
        answer = ask(admin, group_ids, request_timeout_s)
        admin.poll(0)  # librdkafka's log lines
        try:
            conn.send(_sendable(answer))
        except OSError:
            return 0


if __name__ == "__main__":
    # By its package name, not as __main__: the reducers pickle references to this module's functions.
    from rackplan.agent.kafka.isolated_admin import child_main as _child_main

    sys.exit(_child_main(int(sys.argv[1])))
