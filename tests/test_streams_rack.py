"""Rack optimisation: exact optimum against networkx on the full task x client graph, caps, do-better items."""

from __future__ import annotations

import random

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from assignor.flow import InfeasibleFlow, min_cost_flow, min_cost_flow_phases
from assignor.model import Cluster, RackAwareConfig, StreamsApp, StreamsClient, Subtopology
from assignor.streams import run
from assignor.streams_rack import disabled_reason, optimise_active, subtopology_caps, task_cost
from assignor.streams_standby import optimise_standbys, spread_kept
from assignor.streams_tasks import State, build_model
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
        per = {}
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
    net = [0] * n
    for (u, v, c, _w), f in zip(edges, got.flow, strict=True):
        assert 0 <= f <= c
        net[u] += f
        net[v] -= f
    assert net == supply
    assert got.cost == sum(f * w for (_u, _v, _c, w), f in zip(edges, got.flow, strict=True))


def _app(
    clients: tuple[StreamsClient, ...], subs: tuple[Subtopology, ...], parts: dict[str, int], **kw
) -> StreamsApp:  # type: ignore[no-untyped-def]
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
    assert optimise_standbys(model, state, 10, 0, []) == 1


def test_spread_kept() -> None:
    values = [("z1",), ("z2",), ("z1",), ("z3",)]
    assert spread_kept(values, [0, 1], 1, 3)
    assert not spread_kept(values, [0, 1], 1, 2)
    assert spread_kept([], [0, 1], 1, 2)
