"""A count-shift graph's spare units: where the units the losers give up may go, compiled where built.

Issue 29: :func:`~.general_flow.place` adds them to every count-shift graph with losers or droppers (a
loop over every member's topics per flow), and with the rest of the graph compiled that loop was among
the largest Python pieces of a cliff group's CPU.  :func:`spare_units` hands it to the compiled core
(``_flowcore.spare_units``, ``assignor/flow/_shift.c``), which makes the very nodes, edges and dict
entries :func:`spare_units_py` makes, in the same order, and answers None (having made nothing) for
whatever it cannot take as the Python does; the Python is its oracle
(``tests/assignor/test_general_spare.py``) and the builder where no core was built.
"""

from __future__ import annotations

from collections.abc import Set

from ...flow import Edge
from ...flow.compiled import CORE


def spare_units(
    drops: set[int],
    losers: Set[int],
    banned: Set[int],
    gainer: int,
    cnt: list[int],
    min_sub: list[int],
    mt: list[list[int]],
    cls: list[int],
    supply: list[int],
    edges: list[Edge],
    hubs: dict[tuple[int, int], int],
    member_node: dict[int, int],
    spare_of: dict[int, int],
    grows: dict[int, set[int]],
    node_member: dict[int, int],
) -> int:
    """:func:`spare_units_py`, compiled where this install has the core (which takes only empty
    ``spare_of`` and ``grows``: a graph's first spare units)."""
    args = (drops, losers, banned, gainer, cnt, min_sub, mt, cls, supply, edges, hubs, member_node)
    if CORE is not None:
        room = CORE.spare_units(*args, spare_of, grows, node_member)
        if room is not None:
            return room
    return spare_units_py(*args, spare_of, grows, node_member)


def spare_units_py(
    drops: set[int],
    losers: Set[int],
    banned: Set[int],
    gainer: int,
    cnt: list[int],
    min_sub: list[int],
    mt: list[list[int]],
    cls: list[int],
    supply: list[int],
    edges: list[Edge],
    hubs: dict[tuple[int, int], int],
    member_node: dict[int, int],
    spare_of: dict[int, int],
    grows: dict[int, set[int]],
    node_member: dict[int, int],
) -> int:
    """Spare units for members at the bottom of a topic, the count shift's receivers, chosen by the flow;
    returns each spare-unit edge's capacity (``room``).

    One spare node, demanding a unit per loser (none when all go to a named ``gainer``) and per dropper;
    an edge to it from each dropper's node (ascending: a dropper that keeps its count sends its last unit
    there; a dropper without a node gets one, as ``_Network.member`` makes it).  Then per member neither
    loser nor banned, in member order, with the topics it may grow in (its count at most their minimum,
    or one above it when there are droppers: the repair bars it when the members at the minimum do not
    grow with it): its spare-unit node, an edge from it to the spare node and one to it from the hub of
    each such topic and its class (the hub made on first use), all of capacity ``room``.
    """
    spare = len(supply)
    supply.append(-(len(losers) if gainer < 0 else 0) - len(drops))
    for i in sorted(drops):
        v = member_node.get(i)
        if v is None:
            v = member_node[i] = len(supply)
            supply.append(-cnt[i] + 1)
        edges.append((v, spare, 1, 0))
    room = max(1, len(losers))
    reach = 1 if drops else 0
    for d, topics in enumerate(mt):
        if d in losers or d in banned:
            continue
        top = cnt[d] - reach  # grows in the topics whose minimum is at least this
        grow = [t for t in topics if top <= min_sub[t]]
        if grow:  # its spare-unit node, then hubs on first use
            y = spare_of[d] = len(supply)
            supply.append(0)
            grows[d] = set(grow)
            node_member[y] = d
            edges.append((y, spare, room, 0))
            g = cls[d]
            for t in grow:
                hub = hubs.get((t, g))
                if hub is None:
                    hub = hubs[(t, g)] = len(supply)
                    supply.append(0)
                edges.append((hub, y, room, 0))
    return room
