"""The balance program of small components solved without HiGHS (``rack_optimal.small_exact``), against oracles.

:func:`~rackplan.assignor.consumer.rack_optimal.small_exact.solve_small` claims the
optimum of the same program as :func:`~rackplan.assignor.consumer.rack_optimal.milp.solve`
(``W * cross-rack + moves`` over every balanced assignment).  Checked on random
components against brute force (every plan, kept when balanced) where they are tiny,
and against HiGHS's proven optimum where they are larger; its plan must be balanced,
never worse than the start, the start itself among ties; out of budget it says None,
and the exact candidate then asks HiGHS.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rackplan.assignor.consumer.rack_optimal import small_exact
from rackplan.assignor.consumer.rack_optimal.milp import Component, balance_violation, plan_value, solve
from rackplan.assignor.consumer.rack_optimal.small_exact import solve_small
from rackplan.assignor.consumer.sticky import general_exact
from tests.assignor.test_rack_optimal_neighbourhood import _plans, components
from tests.assignor.test_sticky import fresh_group_case, rounds_until_settled

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)


def _weight(comp: Component) -> int:
    return sum(sum(o.values()) for o in comp.owned) + 1


def _brute_force(comp: Component) -> int:
    """The least value over every plan that places each partition with a subscriber and is balanced."""
    n_mem = len(comp.cross)
    plans = _plans(comp, list(range(n_mem)), [{} for _ in range(n_mem)])
    return min(plan_value(comp, p, _weight(comp)) for p in plans if balance_violation(comp, p) is None)


@SETTINGS
@given(components())
def test_tiny_components_reach_the_brute_force_optimum(inst: tuple[Component, list[dict[int, int]]]) -> None:
    comp, start = inst
    found = solve_small(comp, start, budget=10**9)
    assert found is not None
    assert balance_violation(comp, found) is None
    assert plan_value(comp, found, _weight(comp)) == _brute_force(comp)
    if plan_value(comp, start, _weight(comp)) == _brute_force(comp):
        assert found == start  # the tie rule: the start stays unless something is strictly better
    assert solve_small(comp, start, budget=10**9) == found  # deterministic


def _balanced(comp: Component, plan: list[dict[int, int]]) -> list[dict[int, int]]:
    """``plan`` after moves that break no rule until the balance rule holds (each move lowers the squares)."""
    while True:
        total = [sum(p.values()) for p in plan]
        move = next(
            (
                (m, k, min(comp.group_members[comp.class_group[k]], key=lambda j: (total[j], j)))
                for m, p in enumerate(plan)
                for k, v in sorted(p.items())
                if v and total[m] - min(total[j] for j in comp.group_members[comp.class_group[k]]) >= 2
            ),
            None,
        )
        if move is None:
            return plan
        m, k, to = move
        plan[m][k] -= 1
        if not plan[m][k]:
            del plan[m][k]
        plan[to][k] = plan[to].get(k, 0) + 1


@st.composite
def larger_components(draw: st.DrawFn) -> tuple[Component, list[dict[int, int]]]:
    """Up to 6 members, 4 topic groups, classes of up to 7 partitions, and a balanced plan of it."""
    n_mem = draw(st.integers(2, 6))
    n_grp = draw(st.integers(1, 4))
    group_members = [
        sorted(draw(st.sets(st.integers(0, n_mem - 1), min_size=1, max_size=n_mem))) for _ in range(n_grp)
    ]
    assume(set(itertools.chain.from_iterable(group_members)) == set(range(n_mem)))
    class_group = list(range(n_grp)) + draw(st.lists(st.integers(0, n_grp - 1), max_size=3))
    class_size = [draw(st.integers(1, 7)) for _ in class_group]
    cross: list[dict[int, int]] = [{} for _ in range(n_mem)]
    owned: list[dict[int, int]] = [{} for _ in range(n_mem)]
    plan: list[dict[int, int]] = [{} for _ in range(n_mem)]
    for k, g in enumerate(class_group):
        left = class_size[k]
        for m in group_members[g]:
            cross[m][k] = draw(st.integers(0, 1))
            own = draw(st.integers(0, left))
            if own:
                owned[m][k] = own
                left -= own
        plan[draw(st.sampled_from(group_members[g]))][k] = class_size[k]
    comp = Component(
        class_size=class_size, class_group=class_group, group_members=group_members, cross=cross, owned=owned
    )
    return comp, _balanced(comp, plan)


@SETTINGS
@given(larger_components(), st.booleans())
def test_larger_components_reach_highs_proven_optimum(
    inst: tuple[Component, list[dict[int, int]]], light_root: bool
) -> None:
    """With and without HiGHS's sub-MIP heuristics and restart (``light_root``, the exact candidate's way)."""
    comp, start = inst
    assert balance_violation(comp, start) is None
    highs = solve(comp, start, budget=10**9, max_nonzeros=10**9, light_root=light_root)
    assert highs.optimal
    assert balance_violation(comp, highs.counts) is None
    found = solve_small(comp, start, budget=10**9)
    assert found is not None
    assert balance_violation(comp, found) is None
    weight = _weight(comp)
    assert plan_value(comp, found, weight) == plan_value(comp, highs.counts, weight)
    assert plan_value(comp, found, weight) <= plan_value(comp, start, weight)


def _hard() -> tuple[Component, list[dict[int, int]]]:
    """Two members, one also on a second topic, every partition cheaper elsewhere than the start has it."""
    comp = Component(
        class_size=[6, 6, 2],
        class_group=[0, 0, 1],
        group_members=[[0, 1], [0]],
        cross=[{0: 1, 1: 0, 2: 0}, {0: 0, 1: 1}],
        owned=[{}, {}],
    )
    return comp, [{0: 5, 2: 2}, {0: 1, 1: 6}]


def test_out_of_budget_it_says_none_and_with_enough_it_proves() -> None:
    comp, start = _hard()
    found = solve_small(comp, start)
    assert found is not None and plan_value(comp, found, 1) == 1  # 11 -> 1 cross-rack (HiGHS agrees)
    assert plan_value(comp, solve(comp, start).counts, 1) == 1
    assert solve_small(comp, start, budget=5) is None
    spent = next(b for b in range(1, 10_000) if solve_small(comp, start, budget=b) is not None)
    assert solve_small(comp, start, budget=spent) == found  # the same answer at any budget that suffices


def test_parts_of_a_component_are_left_to_highs() -> None:
    comp, start = _hard()
    part = Component(
        comp.class_size, comp.class_group, comp.group_members, comp.cross, comp.owned, floor=[0, 0]
    )
    assert solve_small(part, start) is None


def test_the_exact_candidate_asks_highs_only_when_the_enumeration_runs_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the fresh group of test_sticky (the exact candidate deals 7 cross-rack): the same rounds either way."""
    calls: list[int] = []

    def counted(comp: Component, start: Sequence[dict[int, int]], light_root: bool = False) -> object:
        calls.append(1)
        return solve(comp, start, light_root=light_root)

    monkeypatch.setattr(general_exact, "solve", counted)
    cluster, group = fresh_group_case()
    by_flows = rounds_until_settled(cluster, group)
    assert calls == []
    monkeypatch.setattr(small_exact, "SMALL_WORK", 0)
    by_highs = rounds_until_settled(cluster, group)
    assert calls != []
    assert by_flows[:2] == by_highs[:2] == (1, 0)


def _walked(comp: Component, start: list[dict[int, int]], budget: int) -> tuple[object, int]:
    """The enumeration's answer (None when out of work) and the work it counted."""
    search = small_exact._Search(comp, start, budget)
    try:
        search.run()
    except small_exact._OutOfWork:
        return None, search.work
    return search.best, search.work


@SETTINGS
@given(st.one_of(components(), larger_components()), st.sampled_from([40, 400, 10**9]))
def test_checking_only_the_subscriptions_a_total_touches_is_the_full_check(
    inst: tuple[Component, list[dict[int, int]]], budget: int
) -> None:
    """The walk re-checks only the subscription it fixed and those sharing a topic group whose ``mu`` fell;
    with the full check instead (every fixed subscription at every step) the same plan, work and cut."""
    comp, start = inst
    fast = _walked(comp, start, budget)
    full_check = small_exact._may_hold

    def every_subscription(
        subs: Sequence[object], totals: Sequence[int], mu: Sequence[int | None], which: object = None
    ) -> bool:
        return full_check(subs, totals, mu)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(small_exact, "_may_hold", every_subscription)
        assert _walked(comp, start, budget) == fast


@SETTINGS
@given(st.one_of(components(), larger_components()), st.booleans())
def test_highs_answers_the_same_from_the_mps_file_as_from_arrays(
    inst: tuple[Component, list[dict[int, int]]], light_root: bool
) -> None:
    """The program goes to HiGHS as an MPS file (no numpy); through highspy's arrays (the fallback when no
    temporary file can be written) every answer is the same: plan, proof and bound."""
    from rackplan.assignor.flow import highs

    comp, start = inst
    by_file = solve(comp, start, light_root=light_root)
    real = highs.Program._read_into
    setattr(highs.Program, "_read_into", lambda self, h, core: False)  # noqa: B010
    try:
        by_arrays = solve(comp, start, light_root=light_root)
    finally:
        setattr(highs.Program, "_read_into", real)  # noqa: B010
    assert (by_file.counts, by_file.optimal, by_file.bound) == (
        by_arrays.counts,
        by_arrays.optimal,
        by_arrays.bound,
    )
