"""Hypothesis strategies for Streams apps (contract ``streams_app`` instances as model objects)."""

from __future__ import annotations

from hypothesis import strategies as st

from rackplan.assignor.model import Cluster, RackAwareConfig, StreamsApp, StreamsClient, Subtopology, task_id

RACKS = ("az-a", "az-b", "az-c")


@st.composite
def streams_instances(
    draw: st.DrawFn,
    max_subs: int = 3,
    max_partitions: int = 6,
    max_clients: int = 6,
    assignor: str | None = None,
    strategy: str | None = None,
    rackless_brokers: bool = True,
    rackless_clients: bool = True,
    tags: bool | None = None,
    lags: bool = True,
) -> tuple[Cluster, StreamsApp]:
    n_racks = draw(st.integers(1, 3))
    racks = list(RACKS[:n_racks])
    broker_choices: list[str | None] = [*racks, None] if rackless_brokers else [*racks]
    brokers = {b: draw(st.sampled_from(broker_choices)) for b in range(1, draw(st.integers(1, 6)) + 1)}
    topics: dict[str, tuple[tuple[int, ...], ...]] = {}
    subs = []
    partitions = {}
    for s in range(draw(st.integers(1, max_subs))):
        n = draw(st.integers(1, max_partitions))
        src = [f"s{s}-in{k}" for k in range(draw(st.integers(1, 2)))]
        stateful = draw(st.booleans())
        logs = [f"s{s}-log"] if stateful else []
        for t in src + [x for x in logs if draw(st.booleans()) or True]:
            rf = draw(st.integers(1, min(2, len(brokers))))
            topics[t] = tuple(
                tuple(draw(st.lists(st.sampled_from(sorted(brokers)), min_size=rf, max_size=rf, unique=True)))
                for _ in range(n)
            )
        subs.append(Subtopology(str(s), tuple(src), tuple(logs), stateful))
        partitions[str(s)] = n
    all_tasks = [task_id(s.id, p) for s in subs for p in range(partitions[s.id])]
    client_racks: list[str | None] = [*racks, None] if rackless_clients else [*racks]
    use_tags = draw(st.booleans()) if tags is None else tags
    clients = []
    for i in range(draw(st.integers(1, max_clients))):
        lag_map = {}
        if lags:
            for t in all_tasks:
                if draw(st.integers(0, 3)) == 0:
                    lag_map[t] = draw(st.sampled_from([0, 5, 20_000]))
        clients.append(
            StreamsClient(
                process_id=f"p-{i:02d}",
                rack=draw(st.sampled_from(client_racks)),
                threads=draw(st.integers(1, 3)),
                tags={"zone": draw(st.sampled_from(["z1", "z2", "z3"]))} if use_tags else {},
                task_lags=lag_map,
            )
        )
    app = StreamsApp(
        application_id="app",
        subtopologies=tuple(subs),
        clients=tuple(clients),
        num_standby_replicas=draw(st.integers(0, 2)),
        acceptable_recovery_lag=10,
        max_warmup_replicas=draw(st.integers(1, 3)),
        rack_aware_assignment_tags=("zone",) if use_tags else (),
        rack_aware=RackAwareConfig(
            strategy=strategy or draw(st.sampled_from(["none", "min_traffic", "balance_subtopology"])),
            sticky_to_previous=draw(st.booleans()),
        ),
        assignor=assignor or draw(st.sampled_from(["high-availability", "sticky"])),
        partitions=partitions,
    )
    return Cluster(broker_racks=brokers, topics=topics), app
