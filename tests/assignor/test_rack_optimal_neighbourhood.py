"""The large-neighbourhood search of rack-optimal, against brute force over the same neighbourhoods.

Each step of :mod:`rackplan.assignor.consumer.rack_optimal.neighbourhood` frees
a few members and solves "hand their partitions out again among themselves,
everyone else fixed" as a small mixed-integer program whose members outside
enter only as constants (``Component.floor`` and ``Component.cap``).  The claim
is that this program is exact: its optimum is the best plan of the whole
component that differs from the current one only on the free members.  Checked
here by enumerating every such plan (every split of every class held by the
free members among its free subscribers) and keeping the balanced ones by the
whole component's rule (``balance_violation``), on random small components.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rackplan.assignor.consumer.rack_optimal.milp import Component, balance_violation, plan_value
from rackplan.assignor.consumer.rack_optimal.neighbourhood import _Search, improve


@st.composite
def components(draw: st.DrawFn) -> tuple[Component, list[dict[int, int]]]:
    """A random component and a balanced plan of it (the first balanced one found by enumeration)."""
    n_mem = draw(st.integers(2, 4))
    n_grp = draw(st.integers(1, 3))
    group_members = [
        sorted(draw(st.sets(st.integers(0, n_mem - 1), min_size=1, max_size=n_mem))) for _ in range(n_grp)
    ]
    assume(set(itertools.chain.from_iterable(group_members)) == set(range(n_mem)))
    n_cls = draw(st.integers(n_grp, n_grp + 2))
    class_group = list(range(n_grp)) + [draw(st.integers(0, n_grp - 1)) for _ in range(n_cls - n_grp)]
    class_size = [draw(st.integers(1, 2)) for _ in range(n_cls)]
    cross: list[dict[int, int]] = [{} for _ in range(n_mem)]
    owned: list[dict[int, int]] = [{} for _ in range(n_mem)]
    for k, g in enumerate(class_group):
        left = class_size[k]
        for m in group_members[g]:
            cross[m][k] = draw(st.integers(0, 1))
            own = draw(st.integers(0, left))
            if own:
                owned[m][k] = own
                left -= own
    comp = Component(
        class_size=class_size, class_group=class_group, group_members=group_members, cross=cross, owned=owned
    )
    plans = [
        p
        for p in _plans(comp, list(range(n_mem)), [{} for _ in range(n_mem)])
        if balance_violation(comp, p) is None
    ]
    assume(plans)
    return comp, plans[draw(st.integers(0, len(plans) - 1))]


def _splits(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    if parts == 1:
        yield (total,)
        return
    for first in range(total + 1):
        for rest in _splits(total - first, parts - 1):
            yield (first, *rest)


def _plans(comp: Component, free: list[int], fixed: list[dict[int, int]]) -> Iterator[list[dict[int, int]]]:
    """Every plan that agrees with ``fixed`` outside ``free`` and hands the rest to free subscribers."""
    held = [comp.class_size[k] - sum(f.get(k, 0) for f in fixed) for k in range(len(comp.class_size))]
    takers = [[m for m in comp.group_members[comp.class_group[k]] if m in free] for k in range(len(held))]
    if any(h and not t for h, t in zip(held, takers, strict=True)):
        return
    options = [list(_splits(h, len(t))) if t else [()] for h, t in zip(held, takers, strict=True)]
    for choice in itertools.product(*options):
        plan = [{k: v for k, v in f.items()} for f in fixed]
        for k, split in enumerate(choice):
            for m, v in zip(takers[k], split, strict=True):
                if v:
                    plan[m][k] = plan[m].get(k, 0) + v
        yield plan


SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)


@SETTINGS
@given(components(), st.data())
def test_a_neighbourhood_program_finds_the_best_plan_that_changes_only_its_members(
    inst: tuple[Component, list[dict[int, int]]], data: st.DataObject
) -> None:
    comp, start = inst
    n_mem = len(comp.cross)
    free = tuple(sorted(data.draw(st.sets(st.integers(0, n_mem - 1), min_size=1, max_size=n_mem))))
    weight = sum(sum(o.values()) for o in comp.owned) + 1
    fixed = [{} if m in free else dict(start[m]) for m in range(n_mem)]
    best = min(
        plan_value(comp, p, weight)
        for p in _plans(comp, list(free), fixed)
        if balance_violation(comp, p) is None
    )
    search = _Search(comp, [dict(c) for c in start], budget=10**9)
    before = plan_value(comp, start, weight)
    changed = search.resolve(free)
    after = plan_value(comp, search.counts, weight)
    assert balance_violation(comp, search.counts) is None
    assert changed == (best < before)
    assert after == (best if changed else before)
    assert all(search.counts[m] == start[m] for m in range(n_mem) if m not in free)


@SETTINGS
@given(components())
def test_improve_is_balanced_never_worse_and_deterministic(
    inst: tuple[Component, list[dict[int, int]]],
) -> None:
    comp, start = inst
    weight = sum(sum(o.values()) for o in comp.owned) + 1
    plan, solved = improve(comp, start)
    assert balance_violation(comp, plan) is None
    assert plan_value(comp, plan, weight) <= plan_value(comp, start, weight)
    assert improve(comp, start) == (plan, solved)


def _resolved(comp: Component, start: list[dict[int, int]], free: tuple[int, ...]) -> list[dict[int, int]]:
    search = _Search(comp, [dict(c) for c in start], budget=10**9)
    search.resolve(free)
    return search.counts


def test_a_holder_outside_keeps_a_free_member_from_dropping_below_it() -> None:
    """``floor``: j (outside) holds 2 of g = {j, m}, so m keeps at least 1.

    m reads its one partition of h = {m, r} cross-rack and r would read it
    locally, but handing it to r leaves m at 0 under j's 2.
    """
    j, m, r = 0, 1, 2
    comp = Component(
        class_size=[2, 1],
        class_group=[0, 1],
        group_members=[[j, m], [m, r]],
        cross=[{0: 0}, {0: 0, 1: 1}, {1: 0}],
        owned=[{}, {}, {}],
    )
    start = [{0: 2}, {1: 1}, {}]
    assert balance_violation(comp, start) is None
    assert _resolved(comp, start, (m, r)) == start


def test_a_subscriber_outside_keeps_a_free_member_from_growing_past_it() -> None:
    """``cap``: m holds g = {m, j} and j (outside) holds nothing, so m stays at 1.

    r reads its two partitions of h = {m, r} cross-rack and m would read them
    locally, but taking one puts m at 2 over j's 0.
    """
    m, j, r = 0, 1, 2
    comp = Component(
        class_size=[1, 2],
        class_group=[0, 1],
        group_members=[[m, j], [m, r]],
        cross=[{0: 0, 1: 0}, {0: 0}, {1: 1}],
        owned=[{}, {}, {}],
    )
    start = [{0: 1}, {}, {1: 2}]
    assert balance_violation(comp, start) is None
    assert _resolved(comp, start, (m, r)) == start
    # with j free too, j takes g's partition and m one of h: one cross-rack partition left
    assert _resolved(comp, start, (m, j, r)) == [{1: 1}, {0: 1}, {1: 1}]
