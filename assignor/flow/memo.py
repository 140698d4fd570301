"""Flows already solved, by graph: a search that asks for the same flow twice solves it once.

cooperative-sticky's settling (issue 29) runs its count-shift search again and again
from nearby states, and about one flow in nine it asks for is a graph it has solved
before, node for node and edge for edge.  :func:`~.mincost.min_cost_flow_phases` is a
pure function of the graph, so the answer kept is exactly the one a new solve would
give: plans cannot change, only the work.  What is kept per graph is the flow, or that
it is infeasible, or (for a solve stopped by its cut-off) a lower bound on its cost.
A memo belongs to one caller's search and goes with it; it is never shared between
threads or kept between plans, and it keeps graphs only up to :data:`MEMO_EDGES` edges in
all (a settling call builds up to 660,000: kept whole, they would hold about 50 MiB).
Where the solver runs compiled, a memo keeps nothing unless told (:data:`KEEP`): solving
again is cheaper than keeping.
"""

from __future__ import annotations

from ..record import field, record
from .mincost import COMPILED, Edge, FlowGraph, FlowResult, InfeasibleFlow

#: Edges of the graphs one memo keeps, all together; past them it still answers from what it has.
MEMO_EDGES = 200_000

#: Whether a memo keeps graphs unless told: only where flows are solved in Python.  With the compiled
#: core (:mod:`.compiled`) a solve costs less than the memo's key, its look-up and the garbage
#: collector's passes over what it keeps: the joining rounds of ``bench_settle_work``'s 60 groups took
#: 14.5 s of CPU with the memo and 11.7 s without (the same plans), so such a memo solves every graph.
KEEP = not COMPILED

#: A graph as the memo knows it: its supplies and its edges, in order.
Key = tuple[tuple[int, ...], tuple[Edge, ...]]


@record()
class FlowMemo:
    """What each graph solved so far gave: its flow, ``None`` if infeasible, or an ``int`` its cost
    reaches (a cut-off solve); ``solved`` and ``reused`` count the solver's calls and the answers kept,
    ``room`` the edges it may still keep; ``keep`` False: it keeps nothing and solves every graph (:data:`KEEP`)."""

    seen: dict[Key, FlowResult | int | None] = field(default_factory=dict)
    solved: int = 0
    reused: int = 0
    room: int = MEMO_EDGES
    keep: bool = KEEP

    def solve_below(self, graph: FlowGraph, cutoff: int | None) -> FlowResult | None:
        """:meth:`FlowGraph.solve_below` (``cutoff`` None: :meth:`FlowGraph.solve`), answered from the
        memo when that graph was solved before far enough to tell.

        Raises :class:`InfeasibleFlow` as the solver does.
        """
        if not self.keep:
            self.solved += 1
            return graph.solve() if cutoff is None else graph.solve_below(cutoff)
        key = (tuple(graph.supply), tuple(graph.edges))
        known = self.seen.get(key, -1)  # -1: nothing known yet (every cost reaches it)
        if known is None:
            self.reused += 1
            raise InfeasibleFlow("infeasible (solved before)")
        if isinstance(known, FlowResult):
            self.reused += 1
            return known if cutoff is None or known.cost < cutoff else None
        if cutoff is not None and known >= cutoff:
            self.reused += 1
            return None
        self.solved += 1
        keep = key in self.seen or self.room >= len(graph.edges)
        if keep and key not in self.seen:
            self.room -= len(graph.edges)
        try:
            result = graph.solve() if cutoff is None else graph.solve_below(cutoff)
        except InfeasibleFlow:
            if keep:
                self.seen[key] = None
            raise
        if keep:
            self.seen[key] = result if result is not None else cutoff
        return result
