"""Rack optimisation: exact optimum against networkx on the full task x client graph, caps, do-better items."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from typing import Any
from unittest import mock

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.assignor.flow import InfeasibleFlow, PostconditionError, min_cost_flow, min_cost_flow_phases
from rackplan.assignor.model import Cluster, RackAwareConfig, StreamsApp, StreamsClient, Subtopology
from rackplan.assignor.streams import rack as streams_rack
from rackplan.assignor.streams import run
from rackplan.assignor.streams.rack import disabled_reason, optimise_active, subtopology_caps, task_cost
from rackplan.assignor.streams.standby import optimise_standbys, spread_kept
from rackplan.assignor.streams.tasks import State, build_model
from tests.invariants import assert_feasible_flow
from tests.streams_strategies import streams_instances


def _random_state(model, rng: random.Random, tasks: list[int]) -> State:  # type: ignore[no-untyped-def]
    state = State(model)
    for t in tasks:
        state.active[rng.randrange(model.num_clients)].add(t)
    return state


def _networkx_optimum(model, owner, tasks, strategy, traffic, non_overlap, previous) -> int:  # type: ignore[no-untyped-def]
    """Min cost on Kafka's unaggregated graph: one edge per (task, client) pair."""
    counts = [0] * model.num_clients
    for t in tasks:
        counts[owner[t]] += 1
    g = nx.DiGraph()
    balance = strategy == "balance_subtopology"
    caps = subtopology_caps(model, counts, tasks) if balance else {}
    for t in tasks:
        g.add_node(("t", t), demand=-1)
        free = [owner[t], *(previous[t] if previous else [])]
        for c in range(model.num_clients):
            if not counts[c]:
                continue
            j = model.sub_of[t] if balance else 0
            g.add_edge(
                ("t", t), ("cj", c, j), capacity=1, weight=task_cost(model, t, c, traffic, non_overlap, free)
            )
    for c in range(model.num_clients):
        g.add_node(("c", c), demand=counts[c])
        for j in sorted({model.sub_of[t] for t in tasks}) if balance else [0]:
            if counts[c]:
                g.add_edge(("cj", c, j), ("c", c), capacity=caps[(c, j)] if balance else counts[c], weight=0)
    return int(nx.min_cost_flow_cost(g))


@settings(max_examples=150, deadline=None)
@given(
    streams_instances(rackless_clients=False, max_partitions=8, max_clients=5),
    st.sampled_from(["min_traffic", "balance_subtopology"]),
    st.integers(0, 3),
    st.integers(1, 12),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_optimum_equals_networkx(inst, strategy, non_overlap, traffic, sticky, rng) -> None:  # type: ignore[no-untyped-def]
    cluster, app = inst
    model = build_model(cluster, app)
    tasks = list(range(model.num_tasks))
    state = _random_state(model, rng, tasks)
    owner = state.active_owner()
    counts = [len(a) for a in state.active]
    previous = [[rng.randrange(model.num_clients)] for _ in tasks] if sticky else None
    ran = optimise_active(model, state, tasks, strategy, traffic, non_overlap, previous)
    new_owner = state.active_owner()
    if not ran:  # as Kafka: nothing to gain when every task costs the same everywhere
        groups = set(model.group_of)
        assert all(len({model.active_cross[t][g] for g in groups}) == 1 for t in tasks)
        assert new_owner == owner
        return
    assert [len(a) for a in state.active] == counts, "client loads are those of the baseline"
    cost = sum(
        task_cost(
            model, t, new_owner[t], traffic, non_overlap, [owner[t], *(previous[t] if previous else [])]
        )
        for t in tasks
    )
    assert cost == _networkx_optimum(model, owner, tasks, strategy, traffic, non_overlap, previous)
    if strategy == "balance_subtopology":
        caps = subtopology_caps(model, counts, tasks)
        per: dict[tuple[int, int], int] = {}
        for t in tasks:
            key = (new_owner[t], model.sub_of[t])
            per[key] = per.get(key, 0) + 1
        assert all(n <= caps[key] for key, n in per.items())


@settings(max_examples=300, deadline=None)
@given(st.randoms(use_true_random=False))
def test_phases_solver_matches_ssp(rng: random.Random) -> None:
    n = rng.randint(2, 9)
    edges = [
        (rng.randrange(n), rng.randrange(n), rng.randint(0, 4), rng.randint(0, 6))
        for _ in range(rng.randint(0, 25))
    ]
    edges = [e for e in edges if e[0] != e[1]]
    supply = [0] * n
    for _ in range(rng.randint(0, 5)):
        a, b, k = rng.randrange(n), rng.randrange(n), rng.randint(1, 3)
        supply[a] += k
        supply[b] -= k
    try:
        want = min_cost_flow(n, edges, supply).cost
    except InfeasibleFlow:
        want = None
    try:
        got = min_cost_flow_phases(n, edges, supply)
    except InfeasibleFlow:
        assert want is None
        return
    assert got.cost == want
    assert_feasible_flow(n, edges, supply, got)


def _app(
    clients: tuple[StreamsClient, ...], subs: tuple[Subtopology, ...], parts: dict[str, int], **kw: Any
) -> StreamsApp:
    return StreamsApp("x", subs, clients, partitions=parts, **kw)


def test_rackless_broker_does_not_disable_optimisation() -> None:
    """Do-better: a broker without rack makes its replicas unknown; the rest is still optimised."""
    cluster = Cluster(
        broker_racks={1: "a", 2: "b", 3: None},
        topics={"in": ((2,), (1,), (2,), (1,), (3,), (3,))},
    )
    clients = (StreamsClient("p0", "a", 1, {}), StreamsClient("p1", "b", 1, {}))
    subs = (Subtopology("0", ("in",), (), False),)
    on = _app(clients, subs, {"0": 6}, rack_aware=RackAwareConfig("min_traffic"))
    off = _app(clients, subs, {"0": 6}, rack_aware=RackAwareConfig("none"))
    assert disabled_reason(build_model(cluster, on), on) is None
    model, state, _ = run(cluster, on)
    cross = sum(model.active_cross[t][model.group_of[c]] for c in range(2) for t in state.active[c])
    model_off, state_off, _ = run(cluster, off)
    cross_off = sum(
        model_off.active_cross[t][model_off.group_of[c]] for c in range(2) for t in state_off.active[c]
    )
    assert cross == 0 < cross_off


def test_rackless_client_disables_optimisation() -> None:
    cluster = Cluster(broker_racks={1: "a"}, topics={"in": ((1,),)})
    clients = (StreamsClient("p0", "a", 1, {}), StreamsClient("p1", None, 1, {}))
    app = _app(
        clients, (Subtopology("0", ("in",), (), False),), {"0": 1}, rack_aware=RackAwareConfig("min_traffic")
    )
    assert disabled_reason(build_model(cluster, app), app) == "client p1 has no rack"


def test_sticky_to_previous_option() -> None:
    """Do-better: previous owners cost no move when the option is on (off by default)."""
    cluster = Cluster(broker_racks={1: "a", 2: "b"}, topics={"in": ((2,), (1,))})
    clients = (
        StreamsClient("p0", "a", 1, {}, previous_active=("0_0",)),
        StreamsClient("p1", "b", 1, {}, previous_active=()),
    )
    subs = (Subtopology("0", ("in",), (), True),)
    # baseline: 0_0 -> p0 (cross-rack), 0_1 -> p1 (cross-rack); with a high non-overlap cost
    # the optimiser keeps them, unless stickiness frees 0_0's way back to... p0 only, so:
    model = build_model(cluster, _app(clients, subs, {"0": 2}))
    for sticky, expect in ((False, [0, 1]), (True, [1, 0])):
        state = State(model)
        state.active[0].add(0)
        state.active[1].add(1)
        previous = [[1], [0]] if sticky else None
        optimise_active(model, state, [0, 1], "min_traffic", 10, 20, previous)
        assert state.active_owner() == expect


def test_tag_spreading_enforced_during_swaps() -> None:
    """Do-better: a cost-reducing swap that would put two copies in one zone is refused."""
    cluster = Cluster(broker_racks={1: "a", 2: "b"}, topics={"in": ((1,), (1,)), "log": ((1,), (2,))})
    clients = (
        StreamsClient("p0", "a", 1, {"zone": "z1"}),
        StreamsClient("p1", "b", 1, {"zone": "z2"}),
        StreamsClient("p2", "a", 1, {"zone": "z2"}),
        StreamsClient("p3", "b", 1, {"zone": "z1"}),
    )
    subs = (Subtopology("0", ("in",), ("log",), True),)
    app = _app(clients, subs, {"0": 2}, num_standby_replicas=1, rack_aware_assignment_tags=("zone",))
    model = build_model(cluster, app)
    values = [(c.tags["zone"],) for c in model.clients]
    # task 0 (log in rack a): active p3 (z1), standby p1 (rack b, z2): cross-rack.
    # task 1 (log in rack b): active p2 (z2), standby p0 (rack a, z1): cross-rack.
    # Swapping the standbys makes both local, but each would then share its active's zone.
    state = State(model)
    state.active[3].add(0)
    state.standby[1].add(0)
    state.active[2].add(1)
    state.standby[0].add(1)
    before = [set(s) for s in state.standby]
    assert optimise_standbys(model, state, 10, 0, values) == 0
    assert state.standby == before
    # without spreading constraints the swap lowers the cost, so the refusal is the constraint's doing
    # (the count is of standby copies moved: the swap moves both)
    assert optimise_standbys(model, state, 10, 0, []) == 2
    assert state.standby == [{0}, {1}, set(), set()]


def test_spread_kept() -> None:
    values = [("z1",), ("z2",), ("z1",), ("z3",)]
    assert spread_kept(values, [0, 1], 1, 3)
    assert not spread_kept(values, [0, 1], 1, 2)
    assert spread_kept([], [0, 1], 1, 2)


# --- pooled relaxation, realisation on clients, fallback to the full graph


def _skewed_state(model, rng: random.Random, tasks: list[int]) -> State:  # type: ignore[no-untyped-def]
    """Baseline loads piled on low-numbered clients, so sub-topology caps bind and often conflict."""
    state = State(model)
    for t in tasks:
        state.active[min(rng.randrange(model.num_clients), rng.randrange(model.num_clients))].add(t)
    return state


def _check_optimal(model, owner, new_owner, tasks, strategy, traffic, non_overlap, previous) -> None:  # type: ignore[no-untyped-def]
    counts = [0] * model.num_clients
    for t in tasks:
        counts[owner[t]] += 1
    assert [sum(1 for t in tasks if new_owner[t] == c) for c in range(model.num_clients)] == counts
    free = {t: [owner[t], *(previous[t] if previous else [])] for t in tasks}
    cost = sum(task_cost(model, t, new_owner[t], traffic, non_overlap, free[t]) for t in tasks)
    assert cost == _networkx_optimum(model, owner, tasks, strategy, traffic, non_overlap, previous)
    if strategy == "balance_subtopology":
        caps = subtopology_caps(model, counts, tasks)
        per: dict[tuple[int, int], int] = {}
        for t in tasks:
            key = (new_owner[t], model.sub_of[t])
            per[key] = per.get(key, 0) + 1
        assert all(n <= caps[key] for key, n in per.items())


@settings(max_examples=150, deadline=None)
@given(
    streams_instances(rackless_clients=False, max_subs=3, max_partitions=10, max_clients=7),
    st.sampled_from(["min_traffic", "balance_subtopology", "balance_subtopology"]),
    st.integers(0, 3),
    st.integers(1, 12),
    st.booleans(),
    st.sampled_from(["auto", "full", "no-greedy"]),
    st.randoms(use_true_random=False),
)
def test_optimum_on_skewed_loads_through_every_path(  # type: ignore[no-untyped-def]
    inst, strategy, non_overlap, traffic, sticky, path, rng
) -> None:
    """Pooled relaxation (greedy or max-flow realisation) and the full graph all reach networkx's optimum."""
    cluster, app = inst
    model = build_model(cluster, app)
    tasks = list(range(model.num_tasks))
    state = _skewed_state(model, rng, tasks)
    owner = state.active_owner()
    previous = [[rng.randrange(model.num_clients)] for _ in tasks] if sticky else None
    patches: dict[str, contextlib.AbstractContextManager[object]] = {
        "auto": contextlib.nullcontext(),
        "full": mock.patch.object(streams_rack, "_solve_pooled", return_value=None),
        "no-greedy": mock.patch.object(streams_rack, "_realise", _realise_by_max_flow),
    }
    with patches[path]:
        ran = optimise_active(model, state, tasks, strategy, traffic, non_overlap, previous)
    if ran:
        _check_optimal(model, owner, state.active_owner(), tasks, strategy, traffic, non_overlap, previous)


def _realise_by_max_flow(arrivals: list[int], wants: list[tuple[int, int, list[int]]]):  # type: ignore[no-untyped-def]
    n_b = len(arrivals)
    edges = [
        (k, n_b + w, room[k], 0) for w, (_i, _want, room) in enumerate(wants) for k in range(n_b) if room[k]
    ]
    try:
        flow = min_cost_flow_phases(n_b + len(wants), edges, [*arrivals, *(-w for _i, w, _r in wants)]).flow
    except InfeasibleFlow:
        return None
    return sorted((wants[v - n_b][0], k, f) for (k, v, _c, _w), f in zip(edges, flow, strict=True) if f)


def test_relaxation_that_cannot_be_placed_falls_back_to_the_full_graph() -> None:
    """Two clients of one thread, caps of one task per sub-topology each.

    Rack a: p0 holds 0_1 and 1_1; rack b: p1 holds 0_0 and 1_0.  Sub-topology 0's
    partitions live in rack b; of sub-topology 1, 1_0 lives in rack a and 1_1 in b.
    Without caps, "1_0 joins p0, 1_1 stays, 0_1 leaves" costs as little (12) as the
    capped optimum, but puts two sub-topology 1 tasks on p0: that relaxation
    cannot be placed, so the full graph decides.
    """
    cluster = Cluster(broker_racks={1: "a", 2: "b"}, topics={"t0": ((2,), (2,)), "t1": ((1,), (2,))})
    clients = (StreamsClient("p0", "a", 1, {}), StreamsClient("p1", "b", 1, {}))
    subs = (Subtopology("0", ("t0",), (), True), Subtopology("1", ("t1",), (), True))
    model = build_model(cluster, _app(clients, subs, {"0": 2, "1": 2}))
    state = State(model)
    state.active[0].update({1, 3})
    state.active[1].update({0, 2})
    owner = state.active_owner()
    with mock.patch.object(streams_rack, "_solve_full", wraps=streams_rack._solve_full) as full:
        assert optimise_active(model, state, [0, 1, 2, 3], "balance_subtopology", 10, 1)
    assert full.call_count == 1
    new = state.active_owner()
    assert sorted(model.sub_of[t] for t in range(4) if new[t] == 0) == [0, 1]
    _check_optimal(model, owner, new, [0, 1, 2, 3], "balance_subtopology", 10, 1, None)
    assert sum(task_cost(model, t, new[t], 10, 1, [owner[t]]) for t in range(4)) == 12


def test_realise() -> None:
    # the greedy fills every client: most-left buckets first
    assert streams_rack._realise([1, 1], [(0, 1, [1, 1]), (1, 1, [1, 1])]) == [(0, 0, 1), (1, 1, 1)]
    # the greedy gives client 0 bucket 0, leaving client 1 (room in bucket 0 only) short: the max flow fixes it
    assert streams_rack._realise([1, 1], [(0, 1, [1, 1]), (1, 1, [1, 0])]) == [(0, 1, 1), (1, 0, 1)]
    # both units are of bucket 0 and client 1 has no room for it: no placement
    assert streams_rack._realise([2, 0], [(0, 1, [1, 1]), (1, 1, [0, 1])]) is None
    # rooms above one let a client take several units of one bucket
    assert streams_rack._realise([3], [(4, 3, [3])]) == [(4, 0, 3)]


@settings(max_examples=100, deadline=None)
@given(
    streams_instances(rackless_clients=False, max_partitions=8, max_clients=5),
    st.sampled_from(["min_traffic", "balance_subtopology"]),
    st.integers(1, 5),
    st.randoms(use_true_random=False),
)
def test_free_moves_are_still_as_few_as_possible(inst, strategy, traffic, rng) -> None:  # type: ignore[no-untyped-def]
    """With no non-overlap cost (stateless weights) the placement is cheapest, then moves fewest."""
    cluster, app = inst
    model = build_model(cluster, app)
    tasks = list(range(model.num_tasks))
    state = _skewed_state(model, rng, tasks)
    owner = state.active_owner()
    if not optimise_active(model, state, tasks, strategy, traffic, 0):
        return
    new = state.active_owner()
    _check_optimal(model, owner, new, tasks, strategy, traffic, 0, None)
    # lexicographic (traffic, moves) optimum: traffic weighted above any number of moves
    weight = traffic * (len(tasks) + 1)
    got = sum(task_cost(model, t, new[t], weight, 1, [owner[t]]) for t in tasks)
    assert got == _networkx_optimum(model, owner, tasks, strategy, weight, 1, None)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_spread_kept_is_distinct_values_never_drop(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 6))
    keys = data.draw(st.integers(1, 3))
    values = [tuple(data.draw(st.sampled_from([None, "x", "y", "z"])) for _ in range(keys)) for _ in range(n)]
    holders = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    src = (
        data.draw(st.sampled_from(holders)) if data.draw(st.booleans()) else data.draw(st.integers(0, n - 1))
    )
    dst = data.draw(st.integers(0, n - 1))

    def distinct(clients: list[int], k: int) -> int:
        return len({values[c][k] for c in clients if values[c][k] is not None})

    after = [dst if c == src else c for c in holders]
    want = all(distinct(after, k) >= distinct(holders, k) for k in range(keys))
    assert spread_kept(values, holders, src, dst) == want


def test_a_broken_write_back_raises_and_leaves_the_state_alone() -> None:
    """Kafka's checks after the flow (every task once, every client's load kept) catch a broken write-back.

    p0 (rack a) holds the task whose partition is in rack b and p1 the other
    way round: the flow swaps them.  Written back with every task on p0, the
    loads change: a :class:`PostconditionError` naming client and counts, and
    the state as it was.
    """
    cluster = Cluster(broker_racks={1: "a", 2: "b"}, topics={"t0": ((1,), (2,))})
    clients = (StreamsClient("p0", "a", 1, {}), StreamsClient("p1", "b", 1, {}))
    model = build_model(cluster, _app(clients, (Subtopology("0", ("t0",), (), True),), {"0": 2}))
    tasks = [model.tasks.index("0_0"), model.tasks.index("0_1")]

    def fresh() -> State:
        state = State(model)
        state.active[0].add(tasks[1])
        state.active[1].add(tasks[0])
        return state

    good = fresh()
    assert optimise_active(model, good, tasks, "min_traffic", 10, 1)
    assert good.active_owner()[tasks[0]] == 0 and good.active_owner()[tasks[1]] == 1  # swapped: both local

    def all_to_p0(items: list[int], quota: dict[int, int], prefer: object) -> list[tuple[int, int]]:
        return [(t, 0) for t in sorted(items)]

    state = fresh()
    with (
        mock.patch.object(streams_rack, "_distribute", all_to_p0),
        mock.patch.object(streams_rack, "_read_front", _no_free_edges(streams_rack._read_front)),
        pytest.raises(PostconditionError, match=r"optimise_active: client 0 held 1 of the optimised tasks"),
    ):
        optimise_active(model, state, tasks, "min_traffic", 10, 1)
    assert state.active == fresh().active


_ReadFront = Callable[
    [streams_rack._Problem, list[int], list[tuple[int, int]], streams_rack._Placement], None
]


def _no_free_edges(real: _ReadFront) -> _ReadFront:
    """``_read_front`` with the free-edge units dropped, so every task travels through ``_distribute``."""

    def read(
        p: streams_rack._Problem,
        flow: list[int],
        class_targets: list[tuple[int, int]],
        out: streams_rack._Placement,
    ) -> None:
        real(p, flow, class_targets, out)
        for free in out.free:
            free.clear()

    return read


def test_check_write_back_names_what_failed() -> None:
    check = streams_rack.check_write_back
    check("x", [0, 1], {0: 0, 1: 1}, {0: 1, 1: 0})  # a swap keeps both loads
    with pytest.raises(
        PostconditionError, match=r"x: the flow placed 1 tasks, not the 2 given \(unplaced: \[1\]"
    ):
        check("x", [0, 1], {0: 0, 1: 1}, {0: 1})
    with pytest.raises(
        PostconditionError, match=r"x: client 0 held 1 of the optimised tasks before the flow, 2 after"
    ):
        check("x", [0, 1], {0: 0, 1: 1}, {0: 0, 1: 0})
