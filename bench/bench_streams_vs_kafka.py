"""Streams high-availability: rackplan against Kafka Streams' own assignor on many random apps.

    .venv/bin/python -m bench.bench_streams_vs_kafka [--apps N] [--seed S]

Needs Java 17 and Maven: Kafka Streams 4.3.1's ``HighAvailabilityTaskAssignor``
(rack-aware) runs in the oracle harness (``oracle/``, ``StreamsOracle.java``),
one JVM, all apps in one batch.  Apps: ``tests.streams_oracle_cases.ha_documents``
without lags (where Kafka's rack optimisation runs; 0-2 tag keys), drawn by
Hypothesis from a fixed seed.  Measured from the documents
(``tests.streams_oracle_cases.Instance``), for both: active cross-rack pairs
(the contract's count: source and changelog partitions), standby cross-rack
pairs (changelogs), and standby copies that break the spread rule, by number
of tag keys; and the same standby figures over the apps where both placed
the same actives.  docs/assignors.md quotes a run of this.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, seed, settings

from rackplan.assignor.cli import assign_document


def collect(n: int, at: int) -> list[dict[str, Any]]:
    from tests.streams_oracle_cases import ha_documents

    docs: list[dict[str, Any]] = []

    @seed(at)
    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(ha_documents(lags=False))
    def draw(doc: dict[str, Any]) -> None:
        docs.append(doc)

    draw()
    return docs


def compare(docs: list[dict[str, Any]]) -> Counter[str]:
    from tests.kafka_oracle import KafkaOracle, build_jar
    from tests.streams_oracle_cases import Instance

    oracle = KafkaOracle(build_jar())
    try:
        answers = oracle.answer_many(docs)
    finally:
        oracle.close()
    out: Counter[str] = Counter()
    for doc, answer in zip(docs, answers, strict=True):
        if "error" in answer:
            raise RuntimeError(f"Kafka oracle: {answer['error']}")
        kafka = answer["streams_app"]["assignment"]
        ours = assign_document(doc)["streams_app"]["assignment"]
        inst = Instance(doc)
        m, k = inst.measure(ours), inst.measure(kafka)
        out["apps"] += 1
        out["active cross-rack, rackplan"] += m.active_cross
        out["active cross-rack, Kafka"] += k.active_cross
        out["apps with fewer active cross-rack, rackplan"] += m.active_cross < k.active_cross
        out["apps with fewer active cross-rack, Kafka"] += k.active_cross < m.active_cross
        if not k.copies:
            continue
        keys = f"{len(doc['streams_app']['rack_aware_assignment_tags'])} tag keys"
        out[f"{keys}: apps with standbys"] += 1
        for who, x in (("rackplan", m), ("Kafka", k)):
            out[f"{keys}: apps breaking the spread, {who}"] += x.spread_breaks > 0
            out[f"{keys}: copies breaking the spread, {who}"] += x.spread_breaks
            out[f"{keys}: standby cross-rack, {who}"] += x.standby_cross
        if {c: a["active"] for c, a in ours.items()} == {c: a["active"] for c, a in kafka.items()}:
            out[f"{keys}: apps with identical actives"] += 1
            out[f"{keys}: identical actives, standby cross-rack, rackplan"] += m.standby_cross
            out[f"{keys}: identical actives, standby cross-rack, Kafka"] += k.standby_cross
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apps", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    for name, value in sorted(compare(collect(args.apps, args.seed)).items()):
        print(f"{name}: {value:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
