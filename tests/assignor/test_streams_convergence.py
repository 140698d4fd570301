"""Probing rebalances converge, like Kafka's TaskAssignorConvergenceTest.

Each round feeds the previous round's assignment back as the clients' state:
every task a client held (active, standby or warm-up) is caught up there
(lag 0), everything else unknown.  Clients join and leave between rounds.
After a bounded number of rounds no warm-ups remain, no probing rebalance is
asked for, and the assignment no longer changes.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.assignor.model import Cluster, RackAwareConfig, StreamsApp, StreamsClient
from rackplan.assignor.record import replace
from rackplan.assignor.streams import run
from tests.streams_strategies import RACKS, streams_instances

Snapshot = dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]]


def _round(cluster: Cluster, app: StreamsApp) -> tuple[Snapshot, bool, int]:
    model, state, probing = run(cluster, app)
    snap: Snapshot = {}
    for c, client in enumerate(model.clients):
        snap[client.process_id] = tuple(  # type: ignore[assignment]
            tuple(sorted(model.tasks[t] for t in s))
            for s in (state.active[c], state.standby[c], state.warmup[c])
        )
    cross = sum(
        model.active_cross[t][model.group_of[c]] for c in range(model.num_clients) for t in state.active[c]
    )
    return snap, probing, cross


def _feed_back(app: StreamsApp, snap: Snapshot) -> StreamsApp:
    clients = []
    for c in app.clients:
        active, standby, warmup = snap.get(c.process_id, ((), (), ()))
        lags = {t: 0 for t in (*active, *standby, *warmup)}
        clients.append(replace(c, previous_active=active, previous_standby=standby, task_lags=lags))
    return replace(app, clients=tuple(clients))


def converge(cluster: Cluster, app: StreamsApp, events: list[tuple[int, str]], seed: int) -> tuple[int, int]:
    """Run rounds until stable; returns (rounds used after the last event, final active cross-rack)."""
    rng = random.Random(seed)
    stateful = sum(app.partitions[s.id] for s in app.subtopologies if s.stateful)
    bound = (
        3
        + (stateful * (app.num_standby_replicas + 1) + app.max_warmup_replicas - 1) // app.max_warmup_replicas
    )
    snap: Snapshot = {}
    joined = len(app.clients)
    for at, kind in [*events, (-1, "settle")]:
        rounds = 0
        while True:
            new, probing, cross = _round(cluster, app)
            rounds += 1
            stable = new == snap and not probing and not any(w for _a, _s, w in new.values())
            snap = new
            app = _feed_back(app, snap)
            if stable or (kind != "settle" and rounds >= at):
                break
            assert rounds <= bound, f"no convergence after {rounds} rounds"
        if kind == "join":
            rack = rng.choice(RACKS)
            new_client = StreamsClient(f"p-j{joined:02d}", rack, rng.randint(1, 2), {})
            joined += 1
            app = replace(app, clients=(*app.clients, new_client))
        elif kind == "leave" and len(app.clients) > 1:
            gone = rng.randrange(len(app.clients))
            app = replace(app, clients=app.clients[:gone] + app.clients[gone + 1 :])
    return rounds, cross


events_strategy = st.lists(st.tuples(st.integers(1, 3), st.sampled_from(["join", "leave"])), max_size=3)


@settings(max_examples=40, deadline=None)
@given(
    streams_instances(
        assignor="high-availability", lags=False, rackless_clients=False, tags=False, max_clients=5
    ),
    events_strategy,
    st.integers(0, 1000),
)
def test_probing_rebalances_converge_and_rack_awareness_never_hurts(inst, events, seed) -> None:  # type: ignore[no-untyped-def]
    cluster, app = inst
    app = replace(app, rack_aware=replace(app.rack_aware, sticky_to_previous=False))
    _rounds, cross = converge(cluster, app, events, seed)
    plain = replace(app, rack_aware=RackAwareConfig("none"))
    _r, cross_plain = converge(cluster, plain, events, seed)
    if app.rack_aware.strategy != "balance_subtopology":
        # balance_subtopology may have to leave a baseline that breaks its caps, so only
        # min_traffic (and none, trivially) promise never to be worse than the plain run
        assert cross <= cross_plain
