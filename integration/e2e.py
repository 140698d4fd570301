"""Helpers of the end-to-end scenarios: follower applications, a counted producer, and the ledger.

The ledger is the referee: every follower reports, on one monotonic clock,
when it started and stopped owning a partition (its assign / revoke hooks)
and every message it consumed.  From that it counts duplicates, finds any
moment at which two followers owned one partition, and measures the gap of
every handover (one owner's release to the next owner's start).
"""

from __future__ import annotations

import collections
import datetime
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from rackplan.agent.core.logging import get_logger
from rackplan.agent.follower import FollowerClients, PlanFollower
from rackplan.agent.kafka.metadata_refresh import with_metadata_refresh
from rackplan.agent.kafka.read_back import read_back
from rackplan.agent.kafka.tail import TopicTail
from rackplan.agent.protocol.lease import Heartbeat, decode_heartbeat
from rackplan.agent.protocol.plans import PlanRecord

TP = tuple[str, int]
RACKPLAN = [sys.executable, "-c", "import sys; from rackplan.cli import main; sys.exit(main())"]


def wait_until(pred: Callable[[], bool], timeout: float, what: str, step: float = 0.05) -> None:
    """Wait for a condition with a deadline; the failure says what was awaited."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)


@dataclass
class Interval:
    follower: str
    tp: TP
    start: float
    end: float | None = None
    #: "revoked" (gave it up), "killed" (the follower died holding it), "lost" (fenced: KIP-848's
    #: on_partitions_lost), "" while open
    how: str = ""


@dataclass
class Ledger:
    """What every follower owned when, and what it consumed."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    intervals: list[Interval] = field(default_factory=list)
    #: (follower, topic, partition, offset, time)
    consumed: list[tuple[str, str, int, int, float]] = field(default_factory=list)
    #: wall-clock time minus monotonic time, to print an interval as the logs date things
    wall_offset: float = field(default_factory=lambda: time.time() - time.monotonic())

    def assigned(self, follower: str, parts: Iterable[TP]) -> None:
        now = time.monotonic()
        with self.lock:
            for tp in parts:
                self.intervals.append(Interval(follower, tp, now))

    def revoked(self, follower: str, parts: Iterable[TP], how: str = "revoked") -> None:
        now = time.monotonic()
        with self.lock:
            for tp in parts:
                for iv in self.intervals:
                    if iv.follower == follower and iv.tp == tp and iv.end is None:
                        iv.end, iv.how = now, how

    def killed(self, follower: str) -> None:
        with self.lock:
            parts = [iv.tp for iv in self.intervals if iv.follower == follower and iv.end is None]
        self.revoked(follower, parts, how="killed")

    def consume(self, follower: str, msg: Any) -> None:
        with self.lock:
            self.consumed.append((follower, msg.topic(), msg.partition(), msg.offset(), time.monotonic()))

    # ---- verdicts ---------------------------------------------------------------------

    def counts(self) -> collections.Counter[tuple[str, int, int]]:
        with self.lock:
            return collections.Counter((t, p, o) for _, t, p, o, _ in self.consumed)

    def duplicates(self) -> int:
        c = self.counts()
        return sum(c.values()) - len(c)

    def missing(self, produced: Iterable[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
        c = self.counts()
        return sorted(x for x in produced if x not in c)

    def lost(self) -> int:
        """Partitions a member was told it had lost (KIP-848: the coordinator fenced it)."""
        with self.lock:
            return sum(1 for iv in self.intervals if iv.how == "lost")

    def overlaps(self, excuse_lost: bool = False) -> list[tuple[TP, str, str]]:
        """Partitions two followers owned at the same moment (nothing, when all is well).

        With ``excuse_lost``, an interval that ended in a loss (``how="lost"``: Kafka's
        ``on_partitions_lost``, the coordinator fenced the member, which learns it only later) ends
        when the next owner starts: the coordinator had taken the partition back before it gave it on,
        and a fenced member can no longer commit. :meth:`lost` counts them, and tests report it.
        """
        with self.lock:
            by_tp: dict[TP, list[Interval]] = collections.defaultdict(list)
            for iv in self.intervals:
                by_tp[iv.tp].append(iv)
        out = []
        for tp, ivs in sorted(by_tp.items()):
            for i, a in enumerate(ivs):
                for b in ivs[i + 1 :]:
                    if a.follower == b.follower:
                        continue
                    a_end = math_inf(a.end)
                    b_end = math_inf(b.end)
                    fenced_first = (a.how == "lost" and a.start <= b.start) or (
                        b.how == "lost" and b.start <= a.start
                    )
                    if excuse_lost and fenced_first:
                        continue
                    if a.start < b_end and b.start < a_end:
                        out.append((tp, a.follower, b.follower))
        return out

    def describe_overlaps(self) -> str:
        """Every interval of each partition two followers owned at once, one per line (a failure's message),
        in UTC wall-clock time, so that it can be read against the logs' timestamps."""
        tps = {tp for tp, _a, _b in self.overlaps()}
        with self.lock:
            ivs = sorted((iv for iv in self.intervals if iv.tp in tps), key=lambda iv: (iv.tp, iv.start))
        return "\n".join(
            f"{iv.tp} {iv.follower} {self._utc(iv.start)}..{self._utc(iv.end)} {iv.how}" for iv in ivs
        )

    def _utc(self, monotonic: float | None) -> str:
        if monotonic is None:
            return "(still owned)"
        at = datetime.datetime.fromtimestamp(monotonic + self.wall_offset, datetime.UTC)
        return at.strftime("%H:%M:%S.%f")[:-3]

    def consumed_outside_ownership(self) -> int:
        """Messages consumed by a follower at a moment it did not own their partition."""
        with self.lock:
            ivs = list(self.intervals)
            consumed = list(self.consumed)
        own: dict[tuple[str, TP], list[Interval]] = collections.defaultdict(list)
        for iv in ivs:
            own[(iv.follower, iv.tp)].append(iv)
        bad = 0
        for f, t, p, _o, at in consumed:
            if not any(iv.start <= at <= math_inf(iv.end) for iv in own[(f, (t, p))]):
                bad += 1
        return bad

    def gaps(self) -> tuple[list[float], list[float]]:
        """Handover gaps (release to next start) and failover gaps (death to next start), in seconds."""
        with self.lock:
            by_tp: dict[TP, list[Interval]] = collections.defaultdict(list)
            for iv in self.intervals:
                by_tp[iv.tp].append(iv)
        handovers: list[float] = []
        failovers: list[float] = []
        for ivs in by_tp.values():
            ivs.sort(key=lambda iv: iv.start)
            for a, b in itertools.pairwise(ivs):
                if a.end is None or a.follower == b.follower:
                    continue
                (failovers if a.how == "killed" else handovers).append(b.start - a.end)
        return handovers, failovers


def math_inf(v: float | None) -> float:
    return float("inf") if v is None else v


class FollowerApp:
    """An application thread around a PlanFollower, reporting to the ledger."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        instance: str,
        rack: str | None,
        topics: list[str],
        ledger: Ledger,
        settings: Mapping[str, Any],
        extra: Mapping[str, Any] | None = None,
        clients: FollowerClients | None = None,
    ) -> None:
        self.name = instance
        self.ledger = ledger
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            # group subscription (the fallback) rebalances within seconds, not librdkafka's default 45 s
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
            **(extra or {}),
        }
        if rack is not None:
            config["client.rack"] = rack
        self.follower = PlanFollower(
            config,
            topics,
            instance,
            dict(settings),
            on_assign=lambda _f, parts: ledger.assigned(instance, parts),
            on_revoke=lambda _f, parts: ledger.revoked(instance, parts),
            clients=clients,
        )
        self._stop = threading.Event()
        self._kill = threading.Event()
        #: while set, the application does not poll (busy with a batch): its follower does nothing at all;
        #: ``parked`` says the thread has stopped polling (a poll under way finishes first)
        self.paused = threading.Event()
        self.parked = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"follower-{instance}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        f = self.follower
        try:
            while not self._stop.is_set():
                if self.paused.is_set():
                    self.parked.set()
                    time.sleep(0.01)
                    continue
                self.parked.clear()
                msg = f.poll(0.1)
                if self._kill.is_set():
                    return
                if msg is not None and msg.error() is None:
                    self.ledger.consume(self.name, msg)
            f.close()
        except BaseException as e:  # reported by the test, never swallowed
            self.error = e

    def stop(self) -> None:
        """A clean shutdown: commit, release, unregister."""
        self._stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error

    def kill(self) -> None:
        """A crash: no commit, no release, no unregistration; the ledger closes its ownership now."""
        self._kill.set()
        self._stop.set()
        self.thread.join(30)
        self.ledger.killed(self.name)
        self.follower.abort()


class CountedProducer:
    """Produces numbered messages round-robin over a topic's partitions; remembers what was delivered."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate_per_s: float = 200.0) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.partitions = partitions
        self.delivered: set[tuple[str, int, int]] = set()
        self.failed = 0
        self.sent = 0
        self._producer = Producer(
            with_metadata_refresh(
                {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
            )
        )
        #: produce() calls refused at once (librdkafka believed the topic gone); the number is sent again
        self.refused = 0
        self._interval = 1.0 / rate_per_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def _report(self, err: Any, msg: Any) -> None:
        with self._lock:
            if err is None:
                self.delivered.add((msg.topic(), msg.partition(), msg.offset()))
            else:
                self.failed += 1

    def produce(self, n: int) -> None:
        """``n`` messages now, waiting for every delivery report."""
        for _ in range(n):
            self._one()
        assert self._producer.flush(30) == 0, "messages left undelivered"

    def _one(self) -> None:
        from confluent_kafka import KafkaException

        p = self.sent % self.partitions
        try:
            self._producer.produce(
                self.topic, value=str(self.sent).encode(), partition=p, on_delivery=self._report
            )
        except KafkaException:  # e.g. _UNKNOWN_TOPIC after a broker restart: this number again next time
            self.refused += 1
            self._producer.poll(0.1)
            return
        self.sent += 1
        self._producer.poll(0)

    def start(self) -> None:
        def run() -> None:
            while not self._stop.is_set():
                self._one()
                self._stop.wait(self._interval)

        self.thread = threading.Thread(target=run, name="counted-producer", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self.thread is not None:
            self.thread.join(10)
        assert self._producer.flush(60) == 0, "messages left undelivered"


class Watcher:
    """A tail of the plan and lease topics kept open by the test: what the agents published, in order."""

    def __init__(
        self, bootstrap: str, plan_topic: str = "_rackplan.plans", lease_topic: str = "_rackplan.lease"
    ):
        self.plan_topic, self.lease_topic = plan_topic, lease_topic
        self._tail = TopicTail({"bootstrap.servers": bootstrap}, [plan_topic, lease_topic], 10)
        self.plans: list[tuple[str, PlanRecord | None]] = []
        self.beats: list[Heartbeat] = []

    def refresh(self) -> Watcher:
        from rackplan.agent.protocol.plans import decode_record

        raw, _ = self._tail.read_new()
        for r in raw:
            try:
                if r.topic == self.lease_topic:
                    self.beats.append(decode_heartbeat(r.key, r.value))
                elif r.key is not None:
                    key = r.key.decode()
                    self.plans.append((key, decode_record(key, r.value)))
            except ValueError:
                continue
        return self

    def history(self, key: str) -> list[PlanRecord]:
        return [r for k, r in self.plans if k == key and r is not None]

    def latest(self, key: str) -> PlanRecord | None:
        h = self.history(key)
        return h[-1] if h else None

    def close(self) -> None:
        self._tail.close()


def settled_on(watcher: Watcher, key: str, apps: list[FollowerApp]) -> bool:
    """The newest plan is a target naming exactly ``apps``, and every one of them applied it."""
    rec = watcher.refresh().latest(key)
    if rec is None or rec.state != "proposed":
        return False
    plan = member_assignment(rec)
    if sorted(plan) != sorted(a.name for a in apps):
        return False
    return all(
        a.follower.generation == rec.generation and a.follower.assignment() == sorted(plan[a.name])
        for a in apps
    )


def plan_history(bootstrap: str, key: str, topic: str = "_rackplan.plans") -> list[PlanRecord | None]:
    """Every plan record of ``key`` on the plan topic, in order (malformed ones skipped)."""
    records = read_back({"bootstrap.servers": bootstrap}, topic, 10, get_logger("test"))
    return [r for k, r in records if k == key]


def heartbeats(bootstrap: str, topic: str = "_rackplan.lease") -> list[Heartbeat]:
    """The lease topic's heartbeats in order, each with its record's timestamp as ``seen_ms``."""
    tail = TopicTail({"bootstrap.servers": bootstrap}, topic, 10)
    try:
        raw, _ = tail.read_available(10)
    finally:
        tail.close()
    out = []
    for r in raw:
        try:
            out.append(replace(decode_heartbeat(r.key, r.value), seen_ms=r.timestamp_ms))
        except ValueError:
            continue
    return out


def latest_plan(bootstrap: str, key: str) -> PlanRecord | None:
    history = [r for r in plan_history(bootstrap, key) if r is not None]
    return history[-1] if history else None


def member_assignment(rec: PlanRecord) -> dict[str, list[TP]]:
    return {m: [(t, p) for t, p in parts] for m, parts in rec.body["assignment"].items()}


class AgentProcess:
    """``rackplan agent run`` in a subprocess (so that it can be killed like a crash)."""

    def __init__(self, config: Mapping[str, Any], path: Path, name: str) -> None:
        self.name = name
        self.config_path = path / f"{name}.yaml"
        self.config_path.write_text(yaml.safe_dump(dict(config)), encoding="utf-8")
        self.log_path = path / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = self.log_path.open("ab")
        env = {**os.environ, "RACKPLAN_HA__AGENT_ID": self.name}
        self.proc = subprocess.Popen(
            [*RACKPLAN, "agent", "run", "--config", str(self.config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        log.close()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def pause(self) -> None:
        """SIGSTOP to the supervisor and the agent it runs: a frozen agent (a long GC pause, a stopped VM)."""
        for pid in self._tree():
            os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        for pid in self._tree():
            os.kill(pid, signal.SIGCONT)

    def _tree(self) -> list[int]:
        """The supervisor's pid and its children's (``rackplan agent run`` runs the agent as a child)."""
        if self.proc is None:
            return []
        kids = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:  # the process ended meanwhile
                continue
            if int(fields[1]) == self.proc.pid:
                kids.append(int(stat.parent.name))
        return [self.proc.pid, *kids]

    def stop(self) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc is not None else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)

    def events(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return out
