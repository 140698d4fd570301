"""Kafka's assignors timed warm and cold through the oracle harness (``tests/kafka_oracle.py``).

Warm: one long-lived JVM for the whole run; per case an untimed answer sizes a warm-up of about
``budget`` seconds of calls on the same input, whose later half sizes as many timed calls again (at
least 5 unless that would pass half the timeout), and the later half's medians are taken.  Wall is ``System.nanoTime``, CPU the calling thread's
(``ThreadMXBean``: the JIT's and the collector's threads are not in it).  Cold: a fresh JVM per case
answers the one document; the harness reports that first call's wall and thread CPU, and this module
times the JVM from process start to the answer read (wall) and reads its whole CPU then
(``/proc/PID/stat``: every thread, JIT and GC included).  The JVM runs with the harness's flags
(``-XX:+UseSerialGC``).  A case Kafka does not answer within the timeout kills its JVM and gives None.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from bench.vs_kafka_table import Times, repeats_for, warm_median

if TYPE_CHECKING:
    from tests.kafka_oracle import KafkaOracle


def _start() -> KafkaOracle:
    from tests.kafka_oracle import KafkaOracle, build_jar

    return KafkaOracle(build_jar())


def _ask(oracle: KafkaOracle, doc: dict[str, Any], repeat: int, timeout: float) -> dict[str, Any]:
    answer = oracle.answer_many([{**doc, "oracle_repeat": repeat}], timeout=timeout)[0]
    if "error" in answer:
        raise RuntimeError(f"Kafka oracle: {answer['error']}")
    return answer


class WarmKafka:
    """The run's long-lived JVM (restarted after a timeout killed it)."""

    def __init__(self, budget: float, max_repeat: int, timeout: float) -> None:
        self.budget, self.max_repeat, self.timeout = budget, max_repeat, timeout
        self._oracle: KafkaOracle | None = None

    def time(self, doc: dict[str, Any]) -> Times | None:
        """Median wall and thread CPU of Kafka's JIT-warmed ``assign`` on ``doc``; None past the timeout."""
        if self._oracle is None:
            self._oracle = _start()
        try:
            first = _ask(self._oracle, doc, 0, self.timeout)["oracle_first_ns"] / 1e9
            warmup = _ask(self._oracle, doc, self._repeats(first), self.timeout)
            answer = _ask(
                self._oracle, doc, self._repeats(warm_median(warmup["oracle_timing_ns"])), self.timeout
            )
        except TimeoutError:
            self._oracle = None  # killed by the timeout
            return None
        return Times(warm_median(answer["oracle_timing_ns"]), warm_median(answer["oracle_cpu_ns"]))

    def _repeats(self, seconds: float) -> int:
        return repeats_for(seconds, self.budget, 5, self.max_repeat, self.timeout / 2)

    def close(self) -> None:
        if self._oracle is not None:
            self._oracle.close()
            self._oracle = None


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) a live process has used so far (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cold(doc: dict[str, Any], timeout: float) -> tuple[Times, Times] | None:
    """Kafka in a fresh JVM: (its first ``assign`` call, the JVM from start to the answer read); None past the timeout."""
    from tests.kafka_oracle import build_jar

    build_jar()  # outside the timing
    start = time.perf_counter()
    oracle = _start()
    try:
        answer = _ask(oracle, doc, 0, timeout)
        wall = time.perf_counter() - start
        cpu = process_cpu(oracle.pid)
    except TimeoutError:
        return None
    finally:
        oracle.close()
    call = Times(answer["oracle_first_ns"] / 1e9, answer["oracle_first_cpu_ns"] / 1e9)
    return call, Times(wall, cpu)
