"""bench/bench_passes_ab.py: its "before" forms really run the replaced code, answer as the new ones, and
leave the modules as they were."""

from __future__ import annotations

from typing import Any

import pytest

from bench import bench_passes_ab
from bench.bench_passes_ab import _range_forms, alternate
from bench.vs_kafka_cases import cases
from rackplan.assignor import parse
from rackplan.assignor.consumer import range_assignor
from rackplan.assignor.consumer.rack_optimal import small_exact
from rackplan.assignor.consumer.sticky import general_exact


def test_the_range_forms_agree_and_the_old_one_runs_the_pass_through_the_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = (c.build() for c in cases() if c.name == "range, equal, fresh")
    doc = next(d for d in docs if len(d["consumer_group"]["members"]) == 10)
    cluster = parse.parse_cluster(doc["cluster"])
    group = parse.parse_consumer_group(doc["consumer_group"], cluster)
    calls: list[int] = []
    oracle = vars(bench_passes_ab)["co_partitioned_pass_by_calls"]

    def counted(*args: Any) -> None:
        calls.append(1)
        oracle(*args)

    monkeypatch.setattr(bench_passes_ab, "co_partitioned_pass_by_calls", counted)
    inlined = range_assignor._co_partitioned_pass
    new, old = _range_forms(cluster, group)
    assert new() == old() == range_assignor.range_assignment(cluster, group)
    assert calls  # the case takes the co-partitioned pass, and the old form ran the oracle's
    assert range_assignor._co_partitioned_pass is inlined


def test_the_enumeration_rows_compare_the_two_checks_and_restore_them() -> None:
    before = (small_exact._may_hold, vars(general_exact)["solve_small"], general_exact.EXACT_NONZEROS)
    rows = bench_passes_ab.enumeration_rows(1)
    assert (small_exact._may_hold, vars(general_exact)["solve_small"], general_exact.EXACT_NONZEROS) == before
    assert len(rows) == 1 and "per enumeration (2)" in rows[0]


def test_alternate_gives_each_form_its_own_median() -> None:
    cheap, dear = alternate(lambda: None, lambda: sum(range(20_000)), 3)
    assert 0 < cheap < dear
