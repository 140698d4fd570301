"""cooperative-sticky for unequal subscriptions (Kafka's "general" path).

Balance here is the contract's local condition: no partition can move to a
member subscribed to its topic that holds at least two fewer.  Steps:

1. **Keep** every owned partition whose owner still subscribes to its topic
   (non-matching ones too: step 4 decides whether they move).
2. **Fill**: unowned partitions go, topic by topic (fewest subscribers first,
   as Kafka orders them), to a least-loaded subscriber, a rack-local one when
   several tie (one small heap per rack class per topic).
3. **Balance** (:mod:`assignor.sticky_general_balance`): while a topic has a
   holder with two or more partitions over one of its subscribers, close the
   gap, by a path of free partitions (ones their holder did not own) when there
   is one, else by moving an owned partition, a non-matching one first.
4. **Rack locality** without touching balance or stickiness:

   * single moves of a cross-rack partition to a rack-local subscriber with
     one partition less, when the result is still balanced (checked exactly
     with the histograms), and
   * one exact min-cost flow over the *movable* partitions (unowned ones,
     owned ones that do not match their owner's rack, owned ones already
     moved) with every member's count fixed and a member allowed on a topic
     only if its count is at most one above that topic's least-loaded
     subscriber - exactly the assignments with these counts that are
     balanced.  Cost ``BIG * cross_rack + moves``; members reach partitions
     through one hub per (topic, rack class).  It is applied only when it
     strictly lowers that cost, so a balanced input that is already optimal
     comes back unchanged (stickiness).

   Owned partitions that match their owner's rack are never in the flow:
   Kafka keeps them, and so do we (unless step 3 needs them for balance).
   Single moves and the flow alternate until neither improves.
"""

from __future__ import annotations

from heapq import heappop, heappush

from .flow import min_cost_flow_phases
from .sticky_common import Prepared, deal
from .sticky_general_balance import balance
from .sticky_general_state import GeneralState

Edge = tuple[int, int, int, int]


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
        for gp in range(self.n_parts):
            a = holder[gp]
            k = masks[gp]
            if not crossk[cls[a]][k]:
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

    def optimise(self) -> bool:
        """Exact (cross-rack, moves) placement of the movable partitions at fixed counts; True if it helped."""
        cnt, holder, owner, masks, ptopic, cls = (
            self.cnt,
            self.holder,
            self.owner,
            self.masks,
            self.ptopic,
            self.cls,
        )
        crossk = self.crossk
        n_cls = len(crossk)
        big = self.n_parts + 1
        min_sub = [self.min_sub(t) if self.tm[t] else 0 for t in range(self.n_topics)]
        demand = list(cnt)
        pools: dict[tuple[int, int, int], list[int]] = {}  # (owner or -1, topic, mask) -> partitions
        current = 0
        matches = self.matches
        for gp in range(self.n_parts):
            h, o, k = holder[gp], owner[gp], masks[gp]
            ch = crossk[cls[h]][k]
            if o == h and matches[cls[h]][k]:
                demand[h] -= 1
                continue
            pools.setdefault((o, ptopic[gp], k), []).append(gp)
            current += big * ch + (1 if o >= 0 and o != h else 0)
        if not current:
            return False

        edges: list[Edge] = []
        supply: list[int] = []
        member_node: dict[int, int] = {}
        hubs: dict[tuple[int, int], int] = {}

        def node(s: int = 0) -> int:
            supply.append(s)
            return len(supply) - 1

        def member(i: int) -> int:
            v = member_node.get(i)
            if v is None:
                v = member_node[i] = node(-demand[i])
            return v

        topics = sorted({key[1] for key in pools})
        for t in topics:
            for i in self.tm[t]:
                if demand[i] > 0 and cnt[i] <= min_sub[t] + 1:
                    g = cls[i]
                    hub = hubs.get((t, g))
                    if hub is None:
                        hub = hubs[(t, g)] = node()
                    edges.append((hub, member(i), demand[i], 0))
        for i in range(self.n):  # members whose demand no hub reaches still need their node
            if demand[i] > 0:
                member(i)
        pool_edges: list[tuple[list[int], int, list[tuple[int, int]]]] = []
        for (o, t, k), lst in sorted(pools.items()):
            src = node(len(lst))
            stay = -1
            if o >= 0 and demand[o] > 0 and cnt[o] <= min_sub[t] + 1:
                stay = len(edges)
                edges.append((src, member(o), len(lst), big * crossk[cls[o]][k]))
            outs = []
            for g in range(n_cls):
                hub = hubs.get((t, g))
                if hub is not None:
                    outs.append((len(edges), hub))
                    edges.append((src, hub, len(lst), big * crossk[g][k] + (1 if o >= 0 else 0)))
            pool_edges.append((lst, stay, outs))
        result = min_cost_flow_phases(len(supply), edges, supply)
        if result.cost >= current:
            return False

        flow = result.flow
        incoming: dict[int, list[int]] = {}
        new_holder = list(holder)
        for (o, _t, _k), (lst, stay, outs) in zip(sorted(pools), pool_edges, strict=True):
            # Stay with the owner: those it already holds first.
            order = sorted(lst, key=lambda gp: (holder[gp] != o, gp))
            pos = 0
            if stay >= 0:
                for gp in order[: flow[stay]]:
                    new_holder[gp] = o
                pos = flow[stay]
            for hub, gp in deal(sorted(order[pos:]), [(hub, flow[e]) for e, hub in outs]):
                incoming.setdefault(hub, []).append(gp)
        hub_out: dict[int, list[tuple[int, int]]] = {}
        node_member = {v: i for i, v in member_node.items()}
        for e, (u, v, _cap, _cost) in enumerate(edges):
            if u in incoming and v in node_member and flow[e]:
                hub_out.setdefault(u, []).append((node_member[v], flow[e]))
        for hub, lst in incoming.items():
            for i, gp in deal(sorted(lst), sorted(hub_out.get(hub, []))):
                new_holder[gp] = i
        self.holder = new_holder
        self.reindex()
        return True


def assign_general(prep: Prepared) -> list[list[int]]:
    """Partitions (global numbers) per member; see the module docstring."""
    state = _General(prep)
    state.fill()
    state.reindex()
    balance(state)
    # Each step strictly lowers (cross-rack, moves); the state is final when the flow cannot improve
    # it or local moves find nothing after an improving flow.
    while state.local_moves():
        pass
    while state.optimise() and state.local_moves():
        while state.local_moves():
            pass
    out: list[list[int]] = [[] for _ in range(state.n)]
    for gp, i in enumerate(state.holder):
        out[i].append(gp)
    return out
