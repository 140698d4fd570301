"""The member nodes, hub nodes and member edges of a count-shift graph (:func:`~.general_flow.place`),
compiled where built.

Issue 29: with the flow, its pool edges and its read-back compiled, making the members' and hubs'
nodes was among the largest Python pieces of a cliff group's CPU (once per count-shift flow, a loop
over every subscription).  :func:`members_and_hubs` hands it to the compiled core
(``_flowcore.members_and_hubs``, ``assignor/flow/_nodes.c``), which makes the very nodes, edges and
dict entries :func:`members_and_hubs_py` makes, in the same order, and answers None (having made
nothing) for whatever it cannot take as the Python does; the Python is its oracle
(``tests/assignor/test_general_nodes.py``) and the builder where no core was built.
"""

from __future__ import annotations

from ...flow import Edge
from ...flow.compiled import CORE


def members_and_hubs(
    n_topics: int,
    n: int,
    tm: list[list[int]],
    cnt: list[int],
    min_sub: list[int],
    drops: set[int],
    cls: list[int],
    supply: list[int],
    edges: list[Edge],
    hubs: dict[tuple[int, int], int],
    member_node: dict[int, int],
) -> dict[int, int]:
    """:func:`members_and_hubs_py`, compiled where this install has the core (which takes only empty
    lists and dicts: a graph's first nodes)."""
    args = (n_topics, n, tm, cnt, min_sub, drops, cls, supply, edges, hubs, member_node)
    if CORE is not None:
        made = CORE.members_and_hubs(*args)
        if made is not None:
            return made
    return members_and_hubs_py(*args)


def members_and_hubs_py(
    n_topics: int,
    n: int,
    tm: list[list[int]],
    cnt: list[int],
    min_sub: list[int],
    drops: set[int],
    cls: list[int],
    supply: list[int],
    edges: list[Edge],
    hubs: dict[tuple[int, int], int],
    member_node: dict[int, int],
) -> dict[int, int]:
    """Each member behind the hubs of the topics it may hold at its count ``cnt``: at most one above the
    topic's least-loaded subscriber (``min_sub``), the contract's balance rule at fixed counts.  The
    member's node demands its count (one less for a dropper, which may send it spare).

    Hub nodes (per topic and member class) and member nodes are made on first use, appended to
    ``supply`` and recorded in ``hubs`` and ``member_node``; then every member with a count still
    without a node gets one.  Returns each member node's member.
    """
    for t in range(n_topics):
        bound = min_sub[t] + 1
        for i in tm[t]:
            c = cnt[i]
            if 0 < c <= bound:
                key = (t, cls[i])
                hub = hubs.get(key)
                if hub is None:
                    hub = hubs[key] = len(supply)
                    supply.append(0)
                v = member_node.get(i)
                if v is None:
                    v = member_node[i] = len(supply)
                    supply.append(-c + (1 if i in drops else 0))
                edges.append((hub, v, c, 0))
    for i in range(n):  # members whose count no hub reaches still need their node
        if cnt[i] > 0 and i not in member_node:
            member_node[i] = len(supply)
            supply.append(-cnt[i] + (1 if i in drops else 0))
    return {v: i for i, v in member_node.items()}
