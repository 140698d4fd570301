"""``balance: bytes``'s rule checks, fast, against their plain definitions (issue 26: 42 s at 1,000 x 50,000).

The repair and improvement steps ask :meth:`LoadState.violation` (which member and topic break the load
rule) and :meth:`LoadState.receivers` (where a partition may go) thousands of times; both keep a ranking of
members by load instead of sorting and scanning every member.  Plans depend on their exact answers (the
first violating member in order, the exact receiver set), so each is compared here with the definition,
written out plainly, on random states that random moves keep changing.
"""

from __future__ import annotations

import heapq

from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.assignor.consumer.rack_optimal.load_state import RECEIVERS, LoadState


def plain_violation(s: LoadState) -> tuple[int, str] | None:
    """The rule as the module docstring states it, every member and topic, most loaded first."""
    load = s.load
    for i in sorted(range(len(load)), key=lambda j: (-load[j], j)):
        for t in sorted(s.lightest[i]):
            others = [load[j] for j in s.topic_subs[t] if j != i]
            if others and min(others) + s.lightest[i][t] < load[i]:
                return i, t
    return None


def plain_receivers(s: LoadState, topic: str, i: int, racks: list[int]) -> list[int]:
    others = [j for j in s.topic_subs[topic] if j != i]
    out = {j for _, j in heapq.nsmallest(RECEIVERS, ((s.load[j], j) for j in others))}
    best: dict[int, tuple[int, int]] = {}
    for j in others:
        if racks[j] not in best or (s.load[j], j) < best[racks[j]]:
            best[racks[j]] = (s.load[j], j)
    out.update(j for _, j in best.values())
    return sorted(out)


@st.composite
def states(draw: st.DrawFn) -> tuple[LoadState, list[int], list[str], list[tuple[int, int]]]:
    """A state with random subscriptions (often equal), weights (ties likely) and owners, plus moves."""
    n = draw(st.integers(1, 14))
    topics = [f"t{k}" for k in range(draw(st.integers(1, 4)))]
    equal = draw(st.booleans())
    subs = {
        t: list(range(n)) if equal else sorted(draw(st.sets(st.integers(0, n - 1), min_size=1)))
        for t in topics
    }
    parts = [t for t in topics for _ in range(draw(st.integers(0, 12)))]
    weight = [draw(st.integers(0, 6)) for _ in parts]
    racks = [draw(st.integers(0, 3)) for _ in range(n)]
    s = LoadState(n, subs, weight)
    for p, t in enumerate(parts):
        s.put(p, t, draw(st.sampled_from(subs[t])))
    moves = [
        (p, draw(st.sampled_from(subs[parts[p]])))
        for p in draw(st.lists(st.integers(0, len(parts) - 1), max_size=12) if parts else st.just([]))
    ]
    return s, racks, parts, moves


@settings(max_examples=400, deadline=None)
@given(states())
def test_violation_and_receivers_answer_as_their_definitions(
    case: tuple[LoadState, list[int], list[str], list[tuple[int, int]]],
) -> None:
    s, racks, parts, moves = case
    for step in range(len(moves) + 1):
        assert s.violation() == plain_violation(s)
        for t, subs in s.topic_subs.items():
            for i in subs:
                assert s.receivers(t, i, racks) == plain_receivers(s, t, i, racks), (t, i)
        if step < len(moves):  # loads change: the ranking must follow
            p, j = moves[step]
            s.take(p, parts[p])
            s.put(p, parts[p], j)
        assert s.ranked() == sorted((x, i) for i, x in enumerate(s.load))
