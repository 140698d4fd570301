"""``bench/bench_search_bounds.py``: its count ranges and bound hold for every balanced plan it sees, and the
flows it counts are the search's own."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.bench_search_bounds import bound, cost, count_ranges, measure, runs_of
from rackplan.assignor.consumer.sticky import general, general_flow, general_shift
from rackplan.assignor.consumer.sticky.settling import balanced
from tests.assignor.test_sticky_work import one_joins, seven_racks


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.integers(5, 14), st.integers(20, 90))
def test_every_balanced_plan_of_a_run_lies_within_the_ranges_and_costs_at_least_the_bound(
    seed: int, members: int, partitions: int
) -> None:
    cluster, people = seven_racks(seed, members, partitions)
    runs = runs_of(cluster, one_joins(cluster, people))
    for state in runs.states.values():
        assert balanced(state.prep, state.holder)
        lo, hi = count_ranges(state)
        assert all(a <= c <= b for a, c, b in zip(lo, state.cnt, hi, strict=True)), (lo, state.cnt, hi)
        big = state.prep.cross_price or state.n_parts + 1
        assert bound(state, big) <= cost(state, big)


def test_the_counts_add_up_and_the_search_is_put_back() -> None:
    cluster, people = seven_racks(3, 12, 60)
    totals = measure(iter([(cluster, one_joins(cluster, people))]))
    assert totals["groups"] == 1 and totals["runs"] >= 1
    assert 0 <= totals["after_proven"] <= totals["after_all"] <= totals["flows"]
    assert totals["proven"] <= totals["runs"]
    real = vars(general_flow)["place"]
    assert vars(general)["place"] is real and vars(general_shift)["place"] is real
