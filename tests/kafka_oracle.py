"""Kafka's own Java assignors as a test oracle: one JVM, many instances, over stdin/stdout.

The harness in ``oracle/`` (see ``oracle/src/main/java/dev/rackplan/oracle/Oracle.java``)
calls Kafka 4.4.0's ``RangeAssignor`` and ``CooperativeStickyAssignor`` exactly
as a consumer group leader does and answers each contract instance with
Kafka's plan in the contract's output shape; a ``streams_app`` instance goes to
Kafka Streams' ``HighAvailabilityTaskAssignor`` with rack awareness
(``StreamsOracle.java``), answered as ``{"streams_app": {"assignment": ...,
"probing_rebalance_needed": ..., "rack_aware": ...}}``.  This module builds its jar once
(``mvn -q -f oracle/pom.xml package``) when it is missing or older than its
sources, starts one JVM for the whole test session and pipelines requests, so
thousands of instances cost seconds of JVM time rather than a JVM start each.

``session_oracle()`` is the shared process; test modules wrap it in a
session-scoped fixture.  Without ``java`` or ``mvn`` on the machine the
fixture skips and says why; a failing build fails.
"""

from __future__ import annotations

import atexit
import json
import shutil
import subprocess
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from rackplan.assignor.contract import instance_document
from rackplan.assignor.model import Cluster, ConsumerGroup, ConsumerPlan, TopicPartition

ROOT = Path(__file__).resolve().parent.parent
ORACLE_DIR = ROOT / "oracle"
JAR = ORACLE_DIR / "target" / "rackplan-oracle.jar"


def _sources() -> list[Path]:
    return [ORACLE_DIR / "pom.xml", *sorted((ORACLE_DIR / "src").rglob("*.java"))]


def jar_is_stale() -> bool:
    """True when the jar is missing or older than the pom or any Java source."""
    if not JAR.exists():
        return True
    built = JAR.stat().st_mtime
    return any(p.stat().st_mtime > built for p in _sources())


def build_jar() -> Path:
    """Build the oracle jar if it is missing or stale (the Makefile's ``oracle`` target does the same)."""
    if jar_is_stale():
        mvn = shutil.which("mvn")
        if mvn is None:
            raise FileNotFoundError("mvn")
        proc = subprocess.run(
            [mvn, "-q", "-B", "-f", str(ORACLE_DIR / "pom.xml"), "package"],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0 or not JAR.exists():
            raise RuntimeError(
                f"building the Kafka oracle failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
            )
    return JAR


def document(cluster: Cluster, group: ConsumerGroup) -> dict[str, Any]:
    """The contract input document of a model instance, static members' ``group_instance_id`` included."""
    doc = instance_document(cluster, group)
    for member, out in zip(group.members, doc["consumer_group"]["members"], strict=True):
        if member.group_instance_id is not None:
            out["group_instance_id"] = member.group_instance_id
    return doc


def parse_plan(answer: dict[str, Any]) -> ConsumerPlan:
    """A contract output document (``consumer_group`` part) as a :class:`ConsumerPlan`."""
    if "error" in answer:
        raise RuntimeError(f"Kafka oracle: {answer['error']}")
    cg = answer["consumer_group"]

    def parts(v: list[list[Any]]) -> list[TopicPartition]:
        return sorted((str(t), int(p)) for t, p in v)

    return ConsumerPlan(
        assignment={m: parts(v) for m, v in cg["assignment"].items()},
        revoked={m: parts(v) for m, v in cg["revoked"].items() if v},
    )


class KafkaOracle:
    """One JVM running the oracle; requests are JSON lines, answers come back in order."""

    def __init__(self, jar: Path) -> None:
        java = shutil.which("java")
        if java is None:
            raise FileNotFoundError("java")
        self._proc = subprocess.Popen(
            [java, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=4", "-jar", str(jar)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            bufsize=1 << 20,
        )
        self._lock = threading.Lock()

    @property
    def pid(self) -> int:
        """The JVM's process id (the benchmarks read its CPU time)."""
        return self._proc.pid

    def answer_many(
        self, documents: Sequence[dict[str, Any]], timeout: float | None = None
    ) -> list[dict[str, Any]]:
        """Kafka's answers to contract input documents, in order (written while reading: no pipe deadlock).

        ``timeout``: seconds for the whole batch; past it the JVM is killed (this oracle is then
        unusable: start another) and :class:`TimeoutError` raised, for benchmarks where Kafka may not finish.
        """
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        stdin, stdout = proc.stdin, proc.stdout
        lines = [json.dumps(d, separators=(",", ":")) + "\n" for d in documents]

        def write() -> None:
            try:
                for line in lines:
                    stdin.write(line)
                stdin.flush()
            except BrokenPipeError:  # killed by the timeout: the reader reports it
                pass

        expired = threading.Event()

        def kill() -> None:
            expired.set()  # before the kill: the reader sees it when its pipe closes
            proc.kill()

        with self._lock:
            watchdog = threading.Timer(timeout, kill) if timeout is not None else None
            if watchdog is not None:
                watchdog.start()
            writer = threading.Thread(target=write, daemon=True)
            writer.start()
            out = []
            try:
                for _ in lines:
                    line = stdout.readline()
                    if not line:
                        if expired.is_set():
                            raise TimeoutError(f"Kafka oracle: no answer within {timeout} s (killed)")
                        raise RuntimeError(f"Kafka oracle exited (code {proc.poll()})")
                    out.append(json.loads(line))
            finally:
                if watchdog is not None:
                    watchdog.cancel()
            writer.join()
        return out

    def plans(self, instances: Iterable[tuple[Cluster, ConsumerGroup]]) -> list[ConsumerPlan]:
        """Kafka's plans for model instances (the group's ``assignor`` names Kafka's assignor)."""
        docs = [document(c, g) for c, g in instances]
        return [parse_plan(a) for a in self.answer_many(docs)]

    def plan(self, cluster: Cluster, group: ConsumerGroup) -> ConsumerPlan:
        return self.plans([(cluster, group)])[0]

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()


_SESSION: KafkaOracle | None = None


def session_oracle() -> KafkaOracle:
    """The session's oracle process (built and started on first use); skips without Java or Maven."""
    global _SESSION
    if _SESSION is None:
        try:
            jar = build_jar()
            _SESSION = KafkaOracle(jar)
        except FileNotFoundError as exc:
            pytest.skip(f"the Kafka oracle needs {exc.args[0]} (Java 17 and Maven) on PATH")
        atexit.register(_SESSION.close)
    return _SESSION


@pytest.fixture(scope="session")
def kafka_oracle() -> KafkaOracle:
    """Session-scoped fixture: import it into a test module to use Kafka's assignors as the oracle."""
    return session_oracle()
