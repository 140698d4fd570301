"""The sticky Streams assignor compares client loads exactly without ``lcm(threads)``.

Its heap keyed a client by ``count * lcm(threads) / threads``: exact, but the
lcm grows with every distinct thread count (legal int32s), and one multiple
of it per client made memory quadratic (16,000 distinct counts: 677 MB, and a
MemoryError reported as an internal error with 32,000).  The key is now
``(count << shift) // threads``, which orders loads exactly as the fractions
do; these tests hold it to the old formula, key by key and plan by plan.
"""

from __future__ import annotations

import math
import random
import tracemalloc
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.assignor.model import Cluster, StreamsApp, StreamsClient, Subtopology
from rackplan.assignor.streams import plan_document
from rackplan.assignor.streams.sticky import _Sticky
from rackplan.assignor.streams.tasks import State, build_model
from tests.streams_strategies import streams_instances

INT32_MAX = 2**31 - 1
#: thread counts where exactness is at stake: small ones, int32's top, near-equal large ratios
THREADS = st.one_of(
    st.integers(1, 4),
    st.integers(INT32_MAX - 40, INT32_MAX),
    st.integers(1, INT32_MAX),
    st.sampled_from([2**30, 2**30 - 1, 2**30 + 1, 3 * 2**29, 65_536, 65_535]),
)


def _old_key(sticky: _Sticky, c: int) -> tuple[int, int, int]:
    """The key before: the load as ``count * lcm(threads) / threads[c]``."""
    threads = sticky.model.threads
    n = sticky.count(c)
    return (n * (math.lcm(*threads) // threads[c]), -threads[c] if n else 0, c)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), THREADS), min_size=2, max_size=8), st.randoms())
def test_keys_order_loads_as_the_fractions_and_the_old_key_do(
    loads: list[tuple[int, int]], rng: random.Random
) -> None:
    threads = tuple(th for _n, th in loads)
    shift = 2 * max(threads).bit_length()
    lcm = math.lcm(*threads)
    new = [(n << shift) // th for n, th in loads]
    old = [n * (lcm // th) for n, th in loads]
    exact = [Fraction(n, th) for n, th in loads]
    for i in range(len(loads)):
        for j in range(len(loads)):
            want = (exact[i] > exact[j]) - (exact[i] < exact[j])
            assert (new[i] > new[j]) - (new[i] < new[j]) == want
            assert (old[i] > old[j]) - (old[i] < old[j]) == want
    assert max(new).bit_length() <= shift + 20 + 1  # counts below 2**20: a few machine words


@st.composite
def _sticky_apps(draw: st.DrawFn) -> tuple[Cluster, StreamsApp]:
    cluster, app = draw(streams_instances(assignor="sticky", max_clients=7, max_partitions=8))
    clients = tuple(
        StreamsClient(c.process_id, c.rack, draw(THREADS), c.tags, (), (), c.task_lags) for c in app.clients
    )
    clients = tuple(
        StreamsClient(
            c.process_id,
            c.rack,
            c.threads,
            c.tags,
            tuple(t for t in p.previous_active if draw(st.booleans())),
            tuple(t for t in p.previous_standby if draw(st.booleans())),
            c.task_lags,
        )
        for c, p in zip(clients, app.clients, strict=True)
    )
    return cluster, StreamsApp(
        app.application_id,
        app.subtopologies,
        clients,
        app.num_standby_replicas,
        app.acceptable_recovery_lag,
        app.max_warmup_replicas,
        app.rack_aware_assignment_tags,
        app.rack_aware,
        app.assignor,
        app.partitions,
    )


def _plan(cluster: Cluster, app: StreamsApp) -> object:
    doc = plan_document(cluster, app)
    del doc["stats"]["elapsed_ms"]
    return doc


@settings(max_examples=200, deadline=None)
@given(_sticky_apps())
def test_plans_equal_the_lcm_formulas(inst: tuple[Cluster, StreamsApp]) -> None:
    """The whole sticky plan, thread counts from 1 to int32's top, equals the plan the lcm key gives."""
    from unittest import mock

    cluster, app = inst
    new = _plan(cluster, app)
    with mock.patch.object(_Sticky, "key", _old_key):
        old = _plan(cluster, app)
    assert new == old


def test_thousands_of_distinct_thread_counts_take_little_memory() -> None:
    """4,000 clients, all thread counts distinct near int32's top: the heap's keys stay small.

    Before, ``lcm`` of the counts had about 124,000 bits and every client kept
    a quotient of it: about 60 MB for the sticky assigner's state alone.
    """
    n = 4_000
    cluster = Cluster(broker_racks={1: "a"}, topics={"in": ((1,),)})
    app = StreamsApp(
        "lcm",
        (Subtopology("0", ("in",), (), False),),
        tuple(StreamsClient(f"p{i:05d}", None, INT32_MAX - i, {}) for i in range(n)),
        assignor="sticky",
        partitions={"0": 1},
    )
    model = build_model(cluster, app)
    state = State(model)
    tracemalloc.start()
    try:
        sticky = _Sticky(model, state)
        sticky.add(sticky.find(0), 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, f"{peak / 2**20:.1f} MiB"
    assert state.active[0] == {0}  # every client empty: the first by order
