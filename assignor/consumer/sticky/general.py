"""cooperative-sticky for unequal subscriptions (Kafka's "general" path).

Balance here is the contract's local condition: no partition can move to a
member subscribed to its topic that holds at least two fewer.  Steps:

1. **Keep** every owned partition whose owner still subscribes to its topic
   (non-matching ones too: step 4 decides whether they move).
2. **Fill**: unowned partitions go, topic by topic (fewest subscribers first,
   as Kafka orders them), to a least-loaded subscriber, a rack-local one when
   several tie (one small heap per rack class per topic).
3. **Balance** (:mod:`rackplan.assignor.consumer.sticky.general_balance`): while a topic has a
   holder with two or more partitions over one of its subscribers, close the
   gap, by a path of free partitions (ones their holder did not own) when there
   is one, else by moving an owned partition, a non-matching one first.
4. **Rack locality** (:mod:`rackplan.assignor.consumer.sticky.general_flow`, :mod:`rackplan.assignor.consumer.sticky.general_shift`), each change
   strictly lowering ``BIG * cross_rack + moves``:

   * single moves of a cross-rack partition to a rack-local subscriber with
     one partition less, when the result is still balanced (checked exactly
     with the histograms);
   * one exact min-cost flow over *every* partition with every member's
     count fixed, a member allowed on a topic only if its count is at most
     one above that topic's least-loaded subscriber - exactly the balanced
     assignments with these counts.  An owned partition therefore moves only
     when that lowers the final cross-rack count (or the moves); a balanced
     input that is already optimal comes back unchanged (stickiness);
   * *count shifts*: the same flow with some members one lower and as many
     at the bottom of a topic one higher, which is how Kafka's balancing
     sometimes ends more local than any assignment at our counts.  A local
     search over counts, exact at each count vector it visits, bounded in
     work for large groups.

*Keep-first* runs (``Prepared.keep_owned``, used by
:func:`rackplan.assignor.consumer.sticky.settle_general`): the same steps, but a
partition still with its valid owner after balancing never moves (step 4's single
moves skip it, the flow gives it no edge but back to its owner), so the only moves
are the ones balancing could not avoid.
"""

from __future__ import annotations

from heapq import heappop, heappush

from .common import Prepared
from .general_balance import balance
from .general_flow import Budget, place
from .general_shift import shift_counts
from .general_state import GeneralState


class _General(GeneralState):
    """One general-path run: the fill and rack-locality steps over the shared state."""

    # ---- step 2 -------------------------------------------------------------

    def fill(self) -> None:
        """Deal every unowned partition to a least-loaded subscriber, rack-local among ties."""
        holder, cnt, masks, crossk, cls = self.holder, self.cnt, self.masks, self.crossk, self.cls
        off = self.prep.topic_offset
        for t in sorted(range(self.n_topics), key=lambda t: (len(self.tm[t]), t)):
            todo = [gp for gp in range(off[t], off[t + 1]) if holder[gp] < 0]
            if not todo:
                continue
            heaps: dict[int, list[tuple[int, int]]] = {}
            for i in self.tm[t]:
                heaps.setdefault(cls[i], []).append((cnt[i], i))
            for h in heaps.values():
                h.sort()
            for gp in todo:
                k = masks[gp]
                low = min(h[0] for h in heaps.values())
                pick = low
                g_pick = -1
                for g, h in heaps.items():
                    top = h[0]
                    if top[0] == low[0] and not crossk[g][k] and (g_pick < 0 or top < pick):
                        pick, g_pick = top, g
                if g_pick < 0:
                    g_pick = cls[low[1]]
                c, i = heappop(heaps[g_pick])
                heappush(heaps[g_pick], (c + 1, i))
                holder[gp] = i
                cnt[i] = c + 1

    # ---- step 4 -------------------------------------------------------------

    def local_moves(self) -> bool:
        """Balance-neutral single moves of cross-rack partitions to rack-local subscribers."""
        moved = False
        cnt, holder, masks, crossk, cls = self.cnt, self.holder, self.masks, self.crossk, self.cls
        pinned = self.owner if self.keep_owned else None
        for gp in range(self.n_parts):
            a = holder[gp]
            k = masks[gp]
            if not crossk[cls[a]][k] or (pinned is not None and pinned[gp] == a):
                continue
            t = self.ptopic[gp]
            c = cnt[a]
            bucket = self.sub_hist[t].get(c - 1)
            if not bucket:
                continue
            best = -1
            for b in bucket:
                if (best < 0 or b < best) and not crossk[cls[b]][k] and self.can_grow(b, t):
                    best = b
            if best >= 0 and self.can_shrink(a):
                self.move(gp, best)
                moved = True
        return moved


def keep_first_floor(prep: Prepared) -> int:
    """Cross-rack partitions a keep-first run (``prep.keep_owned``) ends with at least.

    Its first steps (fill, balance) are run: every partition then still with its owner is pinned for
    the rest of the run, so the cross-rack ones among them stay; of the others, those none of whose
    topic's subscribers is local to them are cross-rack wherever they go.  Cheap next to the run's
    flows, and exact as a bound, so :func:`rackplan.assignor.consumer.sticky._choose` skips a run that
    cannot win (issue 29: on the cliff's shape the unpinned part is what lifts the floor above the
    search's answer, and the run is a third of the call).
    """
    state = _General(prep)
    state.fill()
    state.reindex()
    balance(state)
    crossk, cls, masks, owner, ptopic = state.crossk, state.cls, state.masks, state.owner, state.ptopic
    local = state.local_bits
    return sum(
        crossk[cls[h]][k] if owner[gp] == h else (1 if k and not k & local[ptopic[gp]] else 0)
        for gp, (h, k) in enumerate(zip(state.holder, masks, strict=True))
    )


def assign_general(prep: Prepared) -> list[list[int]]:
    """Partitions (global numbers) per member; see the module docstring."""
    return assign_general_proven(prep)[0]


def assign_general_proven(
    prep: Prepared, budget: Budget | None = None
) -> tuple[list[list[int]], list[int] | None]:
    """:func:`assign_general`, and its holder when a flow proved its cross-rack count the fewest at its counts.

    :func:`rackplan.assignor.consumer.sticky.settle` hands that proof to the simulated
    follow-up round (``Prepared.min_cross_holder``): when that round reaches
    the same holder with nothing moved, its flow could not gain and is skipped.
    """
    state = _General(prep)
    state.fill()
    state.reindex()
    balance(state)
    # Each step strictly lowers (cross-rack, moves); the state is final when the flow cannot improve
    # it or local moves find nothing after an improving flow.
    while state.local_moves():
        pass
    while place(state) is True and state.local_moves():
        while state.local_moves():
            pass
    budget = Budget() if budget is None else budget
    while shift_counts(state, budget):
        while state.local_moves():
            pass
    out: list[list[int]] = [[] for _ in range(state.n)]
    for gp, i in enumerate(state.holder):
        out[i].append(gp)
    return out, (state.holder if state.holder == state.min_cross_holder else None)
