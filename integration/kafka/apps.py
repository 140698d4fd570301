"""The Java programs of ``integration/kafka/apps`` as Python objects: start, read what they print, stop.

Each program prints one JSON object per line (its assignment as Kafka gave
it); a reader thread keeps every line with the time it arrived, and closing
the program's stdin stops it cleanly (consumers leave their group).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from integration.kafka.cluster import CLIENTS_JAR, JVM_OPTS, KAFKA_DIR, LauncherError
from integration.kafka.spawn import spawn

APPS_DIR = KAFKA_DIR / "apps"
APPS_JAR = APPS_DIR / "target" / "rackplan-it-apps.jar"


#: Kafka 4.3's client (``make kafka``): a program run on it instead of the apps' own 4.4 libraries is a
#: Kafka 4.3 application (rackplan's jar, built against 4.4, must keep working there).
KAFKA_43_LIB = KAFKA_DIR / "clients-4.3" / "lib"


def apps_classpath(kafka_lib: Path | None = None) -> str:
    """The apps jar, Kafka's libraries (the apps' own, or ``kafka_lib``) and rackplan's jar."""
    if not APPS_JAR.exists():
        raise LauncherError(f"{APPS_JAR} is missing: run `make kafka`")
    if kafka_lib is not None and not (kafka_lib / ".resolved").exists():
        raise LauncherError(f"{kafka_lib} is missing: run `make kafka`")
    lib = kafka_lib or APPS_DIR / "target" / "lib"
    return f"{APPS_JAR}:{lib / '*'}:{CLIENTS_JAR}"


class JavaApp:
    """One JVM running a main class of the apps jar; ``lines`` are its parsed JSON output lines."""

    def __init__(
        self,
        main_class: str,
        args: Sequence[str],
        log: Path,
        heap_mb: int = 192,
        kafka_lib: Path | None = None,
    ) -> None:
        self.log = log
        cmd = ["java", f"-Xmx{heap_mb}m", *JVM_OPTS, "-cp", apps_classpath(kafka_lib), main_class, *args]
        self._err = log.open("ab")
        self.process = spawn(  # dies with the suite, not with the thread that started it
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, start_new_session=True
        )
        self.lines: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            try:
                doc = json.loads(raw)
            except ValueError:
                continue
            with self._cond:
                self.lines.append(doc)
                self._cond.notify_all()

    def wait_for(self, pred: Callable[[dict[str, Any]], bool], timeout: float, what: str) -> dict[str, Any]:
        """The first line (old or new) matching ``pred``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    if pred(line):
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    raise AssertionError(
                        f"{what}: not seen within {timeout:.0f} s; last lines {self.lines[-3:]}"
                    )
                self._cond.wait(min(left, 0.5))

    @property
    def last(self) -> dict[str, Any] | None:
        with self._cond:
            return self.lines[-1] if self.lines else None

    def stop(self, timeout: float = 30.0) -> None:
        """Close stdin (the program leaves its group and exits); kill it if it does not."""
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.close()
                self.process.wait(timeout=timeout)
            except (subprocess.TimeoutExpired, BrokenPipeError, OSError):
                self.process.kill()
                self.process.wait(timeout=10)
        self._err.close()

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)
        self._err.close()


def group_member(
    bootstrap: str,
    group: str,
    name: str,
    rack: str | None,
    assignor: str,
    topics: Sequence[str],
    log_dir: Path,
    protocol: str = "classic",
) -> JavaApp:
    """A Java consumer (kafka-clients) in ``group`` with Kafka's ``range`` or ``cooperative-sticky`` assignor."""
    args = [bootstrap, group, name, rack or "-", assignor, ",".join(topics), protocol]
    return JavaApp("dev.rackplan.it.GroupMember", args, log_dir / f"{name}.log")


def streams_instance(
    bootstrap: str,
    application_id: str,
    process: str,
    rack: str,
    input_topic: str,
    work_dir: Path,
    standbys: int = 1,
    strategy: str = "balance_subtopology",
    plan_topic: str | None = None,
    registrations_topic: str | None = None,
) -> JavaApp:
    """One instance of the Streams app (kafka-streams): repartition by value, count in store ``counts``.

    With ``plan_topic``, RackplanTaskAssignor (clients/java) assigns; with ``registrations_topic`` too,
    the group leader registers the app's clients there."""
    state = work_dir / f"state-{process}"
    state.mkdir(parents=True, exist_ok=True)
    args = [bootstrap, application_id, process, rack, str(state), input_topic, str(standbys), strategy]
    if plan_topic is not None:  # RackplanTaskAssignor (clients/java) follows the app's plans
        args.append(plan_topic)
        if registrations_topic is not None:
            args.append(registrations_topic)
    return JavaApp("dev.rackplan.it.StreamsApp", args, work_dir / f"{process}.log", heap_mb=256)


def plan_member(
    bootstrap: str,
    group: str,
    name: str,
    rack: str,
    topics: Sequence[str],
    protocol: str,
    control_topics: dict[str, str],
    log_dir: Path,
    kafka_lib: Path | None = None,
) -> JavaApp:
    """A Java consumer following rackplan's plans (clients/java): ``classic`` (cooperative), ``eager`` or
    ``consumer`` (KIP-848, the brokers' RackplanServerAssignor); it registers itself under ``name``.
    ``kafka_lib``: another kafka-clients than the apps' own (:data:`KAFKA_43_LIB`)."""
    if not CLIENTS_JAR.exists():
        raise LauncherError(f"{CLIENTS_JAR} is missing: run `make clients`")
    args = [
        bootstrap,
        group,
        name,
        rack,
        ",".join(topics),
        protocol,
        control_topics["plan_topic"],
        control_topics["registrations_topic"],
    ]
    return JavaApp("dev.rackplan.it.PlanMember", args, log_dir / f"{name}.log", kafka_lib=kafka_lib)


def streams_group_instance(
    bootstrap: str,
    application_id: str,
    process: str,
    rack: str,
    input_topic: str,
    work_dir: Path,
    assignor: str | None,
    standbys: int = 1,
) -> JavaApp:
    """One instance of the same Streams app in a KIP-1071 Streams group (``group.protocol=streams``): the
    broker assigns; with ``assignor`` the group config ``streams.assignor.name`` is set to it first."""
    state = work_dir / f"state-{process}"
    state.mkdir(parents=True, exist_ok=True)
    args = [bootstrap, application_id, process, rack, str(state), input_topic, assignor or "-", str(standbys)]
    return JavaApp("dev.rackplan.it.StreamsGroupApp", args, work_dir / f"{process}.log", heap_mb=256)
