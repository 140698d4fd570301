"""The order of Kafka's task-movement queue (``movement.java_poll_order``).

Kafka's own code is the oracle of the whole movement step
(``tests/assignor/test_streams_vs_kafka_java.py``: every standby and warm-up as Kafka's,
task movements included); these tests pin the queue itself.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rackplan.assignor.streams.movement import java_poll_order

Movement = tuple[int, int, int]

movements = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 4), st.integers(0, 6)), max_size=30, unique=True
)


@given(movements)
def test_every_movement_comes_out_once_in_key_order(items: list[Movement]) -> None:
    out = java_poll_order(items)
    assert sorted(out) == sorted(items)
    assert [m[:2] for m in out] == sorted(m[:2] for m in items), "a priority queue: keys never go down"


@given(movements)
def test_without_ties_the_order_is_the_keys(items: list[Movement]) -> None:
    unique = list({m[:2]: m for m in items}.values())
    assert java_poll_order(unique) == sorted(unique)


def test_tied_movements_come_out_in_heap_order_not_offer_order() -> None:
    # Offered as Kafka scans clients: (caught-up count, task, client).  Traced through
    # java.util.PriorityQueue by hand: a = (2, 0, 0) is polled first, and the last item offered,
    # d = (3, 1, 3), sifted down from the root, stops above b = (3, 1, 0) (equal keys do not swap),
    # so d comes out before b, which was offered first.
    a, b, c, d = (2, 0, 0), (3, 1, 0), (2, 0, 2), (3, 1, 3)
    assert java_poll_order([a, b, c, d]) == [a, c, d, b]
