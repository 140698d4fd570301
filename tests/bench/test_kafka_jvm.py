"""bench/kafka_jvm.py and the oracle's timing fields it reads (Oracle.java, StreamsOracle.java, Clock.java).

Needs Java 17 and Maven (skips without, as every oracle test).  No figure is compared with a time: the
checks are the fields' presence and counts, that timing the calls leaves Kafka's answer as it was, that
a JVM's whole CPU includes its calling thread's, and that a batch past its timeout kills the JVM.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.bench_streams import make_instance
from bench.kafka_jvm import WarmKafka, cold
from bench.vs_kafka_cases import cases
from tests.kafka_oracle import KafkaOracle, build_jar, session_oracle


@pytest.fixture(scope="module")
def oracle() -> KafkaOracle:
    return session_oracle()


def _small(prefix: str) -> dict[str, Any]:
    return next(c for c in cases() if c.name.startswith(prefix) and c.size == "small").build()


@pytest.mark.parametrize("prefix", ["range", "cooperative-sticky", "streams"])
def test_the_oracle_times_its_first_call_and_each_repeat_in_wall_and_thread_cpu(
    oracle: KafkaOracle, prefix: str
) -> None:
    doc = _small(prefix)
    plain, timed = oracle.answer_many([doc, {**doc, "oracle_repeat": 4}])
    for key in ("oracle_timing_ns", "oracle_cpu_ns"):
        assert key not in plain
        assert len(timed[key]) == 4 and all(isinstance(v, int) and v >= 0 for v in timed[key])
    for key in ("oracle_first_ns", "oracle_first_cpu_ns"):
        assert isinstance(plain[key], int) and plain[key] >= 0
    strip = {k: v for k, v in timed.items() if not k.startswith("oracle_")}
    assert strip == {k: v for k, v in plain.items() if not k.startswith("oracle_")}


def test_warm_and_cold_give_both_figures_and_the_jvm_contains_its_first_call() -> None:
    doc = _small("cooperative-sticky")
    warm = WarmKafka(budget=0.05, max_repeat=20, timeout=120)
    try:
        got = warm.time(doc)
    finally:
        warm.close()
    assert got is not None and got.cpu > 0 and got.wall > 0
    first = cold(doc, timeout=120)
    assert first is not None
    call, jvm = first
    assert jvm.wall >= call.wall and jvm.cpu >= call.cpu > 0


def test_a_batch_past_its_timeout_kills_the_jvm_and_says_so() -> None:
    slow = make_instance(200, 25)  # Kafka's rack-aware Streams assignor takes seconds here
    own = KafkaOracle(build_jar())
    try:
        with pytest.raises(TimeoutError, match="no answer within"):
            own.answer_many([slow], timeout=0.01)
        assert own._proc.wait(timeout=30) != 0
    finally:
        own.close()
