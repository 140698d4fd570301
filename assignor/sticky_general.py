"""cooperative-sticky for unequal subscriptions (Kafka's "general" path).

Balance here is the contract's local condition: no partition can move to a
member subscribed to its topic that holds at least two fewer.  Steps:

1. **Keep** every owned partition whose owner still subscribes to its topic
   (non-matching ones too: step 4 decides whether they move).
2. **Fill**: unowned partitions go, topic by topic (fewest subscribers first,
   as Kafka orders them), to a least-loaded subscriber, a rack-local one when
   several tie (one small heap per rack class per topic).
3. **Balance**: while a topic has a holder with two or more partitions over one
   of its subscribers, close the gap.  First by an augmenting path of *free*
   partitions (ones their holder did not own, so moving them costs nothing):
   one free partition is handed along each step, so only the two ends change
   counts.  Into the low member ``y``, from a member with at least two more
   (the sum of squared counts drops); or with exactly one more when neither
   end can break balance by it (the counts trade places and the gap closes by
   one without opening another); else out of the high member, symmetrically.
   Only if no such path exists does an owned partition move, a non-matching
   one first.  Every step lowers (sum of squares, total excess gap)
   lexicographically, so this ends.  Per-topic histograms (count -> members)
   replace Kafka's sorted sets: a step costs the topics of the members it
   touches, and a histogram of members holding free partitions rules out
   hopeless path searches at once.
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

from collections import deque
from heapq import heappop, heappush

from .flow import min_cost_flow_phases
from .sticky_common import Prepared, deal

Edge = tuple[int, int, int, int]


class _General:
    """Mutable state of one general-path run."""

    def __init__(self, prep: Prepared) -> None:
        self.prep = prep
        self.n = len(prep.member_ids)
        self.n_topics = len(prep.topics)
        self.n_parts = prep.num_partitions
        self.cls = prep.member_class
        self.masks = prep.part_mask
        self.ptopic = prep.part_topic
        self.owner = prep.owner
        self.mt = prep.member_topics
        self.tm = prep.topic_members
        mask_set = sorted(set(self.masks))
        self.crossk = [{k: prep.cross(g, k) for k in mask_set} for g in range(len(prep.classes))]
        self.matches = [{k: prep.matches(g, k) for k in mask_set} for g in range(len(prep.classes))]
        self.holder = list(self.owner)
        self.cnt = [0] * self.n
        for o in self.owner:
            if o >= 0:
                self.cnt[o] += 1
        # built by _index()
        self.hold: list[dict[int, set[int]]] = []
        self.freeh: list[dict[int, int]] = []
        self.sub_hist: list[dict[int, set[int]]] = []
        self.hold_hist: list[dict[int, set[int]]] = []
        # members holding free partitions (not their own), by count: where a free path can start
        self.free_total: list[int] = []
        self.free_hist: dict[int, set[int]] = {}
        # bumped by every move; memoised balance checks are valid for one version
        self.version = 0
        self._shrink_memo: dict[int, tuple[int, bool]] = {}

    # ---- step 2 -------------------------------------------------------------

    def fill(self) -> None:
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

    # ---- bookkeeping --------------------------------------------------------

    def _index(self) -> None:
        self.hold = [{} for _ in range(self.n)]
        self.freeh = [{} for _ in range(self.n_topics)]
        for gp, i in enumerate(self.holder):
            t = self.ptopic[gp]
            self.hold[i].setdefault(t, set()).add(gp)
            if self.owner[gp] != i:
                fh = self.freeh[t]
                fh[i] = fh.get(i, 0) + 1
        self.sub_hist = [{} for _ in range(self.n_topics)]
        for t, members in enumerate(self.tm):
            d = self.sub_hist[t]
            for i in members:
                d.setdefault(self.cnt[i], set()).add(i)
        self.hold_hist = [{} for _ in range(self.n_topics)]
        for i, held in enumerate(self.hold):
            c = self.cnt[i]
            for t in held:
                self.hold_hist[t].setdefault(c, set()).add(i)
        self.free_total = [0] * self.n
        for fh in self.freeh:
            for i, k in fh.items():
                self.free_total[i] += k
        self.free_hist = {}
        for i, k in enumerate(self.free_total):
            if k:
                self.free_hist.setdefault(self.cnt[i], set()).add(i)

    @staticmethod
    def _hist_move(d: dict[int, set[int]], old: int, new: int, i: int) -> None:
        s = d[old]
        s.discard(i)
        if not s:
            del d[old]
        d.setdefault(new, set()).add(i)

    def _set_count(self, i: int, new: int) -> None:
        old = self.cnt[i]
        for t in self.mt[i]:
            self._hist_move(self.sub_hist[t], old, new, i)
        for t in self.hold[i]:
            self._hist_move(self.hold_hist[t], old, new, i)
        if self.free_total[i]:
            self._hist_move(self.free_hist, old, new, i)
        self.cnt[i] = new

    def move(self, gp: int, b: int) -> None:
        """Give partition ``gp`` to member ``b``, keeping every index in step."""
        self.version += 1
        a = self.holder[gp]
        t = self.ptopic[gp]
        s = self.hold[a][t]
        s.discard(gp)
        if not s:
            del self.hold[a][t]
            hh = self.hold_hist[t]
            hs = hh[self.cnt[a]]
            hs.discard(a)
            if not hs:
                del hh[self.cnt[a]]
        if self.owner[gp] != a:
            fh = self.freeh[t]
            fh[a] -= 1
            if not fh[a]:
                del fh[a]
            self.free_total[a] -= 1
            if not self.free_total[a]:
                fs = self.free_hist[self.cnt[a]]
                fs.discard(a)
                if not fs:
                    del self.free_hist[self.cnt[a]]
        self._set_count(a, self.cnt[a] - 1)
        s2 = self.hold[b].get(t)
        if s2 is None:
            s2 = self.hold[b][t] = set()
            self.hold_hist[t].setdefault(self.cnt[b], set()).add(b)
        s2.add(gp)
        if self.owner[gp] != b:
            fh = self.freeh[t]
            fh[b] = fh.get(b, 0) + 1
            self.free_total[b] += 1
            if self.free_total[b] == 1:
                self.free_hist.setdefault(self.cnt[b], set()).add(b)
        self._set_count(b, self.cnt[b] + 1)
        self.holder[gp] = b

    def min_sub(self, t: int) -> int:
        return min(self.sub_hist[t])

    # ---- step 3 -------------------------------------------------------------

    def balance(self) -> None:
        queue = deque(range(self.n_topics))
        queued = [True] * self.n_topics
        while queue:
            t = queue.popleft()
            queued[t] = False
            while True:
                hh = self.hold_hist[t]
                if not hh:
                    break
                hi = max(hh)
                lo = self.min_sub(t)
                if hi - lo < 2:
                    break
                x = min(hh[hi])
                y = min(self.sub_hist[t][lo])
                moves = self._free_path(y) or self._free_path_out(x) or [self._owned_move(t, x, y)]
                touched: set[int] = set()
                for gp, a, b in moves:
                    self.move(gp, b)
                    touched.update(self.mt[a])
                    touched.update(self.hold[b])
                for u in sorted(touched):
                    if not queued[u]:
                        queued[u] = True
                        queue.append(u)

    def _free_path(self, y: int) -> list[tuple[int, int, int]] | None:
        """Moves handing one free partition along a path into ``y``, or None.

        The path starts at a member holding at least two more than ``y`` (the
        sum of squared counts drops), or exactly one more when neither end can
        break balance by it (``y`` may grow, the start may shrink): then the
        counts only trade places and the gap that made ``y`` a low subscriber
        closes by one, without opening any other.
        """
        cnt = self.cnt
        need = cnt[y] + 2
        sideways = self._can_grow_held(y)
        if not self.free_hist or max(self.free_hist) < need - (1 if sideways else 0):
            return None  # no member could start such a path
        parent: dict[int, tuple[int, int]] = {y: (-1, -1)}
        expanded: set[int] = set()
        min_cache: dict[int, int] = {}
        frontier = [y]
        found = -1
        for w in frontier:
            for v in self.mt[w]:
                if v in expanded:
                    continue
                fh = self.freeh[v]
                if not fh:
                    continue
                ms = min_cache.get(v)
                if ms is None:
                    ms = min_cache[v] = self.min_sub(v)
                # y grows by one; any other step keeps its count but starts holding topic v.
                if cnt[w] > (ms if w == y else ms + 1):
                    continue
                expanded.add(v)
                for z in fh:
                    if z in parent:
                        continue
                    parent[z] = (w, v)
                    if cnt[z] >= need or (sideways and cnt[z] == need - 1 and self._can_shrink(z)):
                        found = z
                        break
                    frontier.append(z)
                if found >= 0:
                    break
            if found >= 0:
                break
        if found < 0:
            return None
        moves = []
        z = found
        while z != y:
            w, v = parent[z]
            moves.append((self._pick_free(z, w, v), z, w))
            z = w
        return moves

    def _free_path_out(self, x: int) -> list[tuple[int, int, int]] | None:
        """Moves handing one free partition along a path out of ``x``, or None (mirror of :meth:`_free_path`)."""
        if not self.free_total[x]:
            return None  # a path out of x starts with a free partition of x
        cnt = self.cnt
        low = cnt[x] - 2
        sideways = self._can_shrink(x)
        parent: dict[int, tuple[int, int]] = {x: (-1, -1)}
        expanded: set[int] = set()
        min_cache: dict[int, int] = {}
        frontier = [x]
        found = -1
        for w in frontier:
            for v, fcount in self.freeh_of(w):
                if v in expanded or not fcount:
                    continue
                expanded.add(v)
                ms = min_cache.get(v)
                if ms is None:
                    ms = min_cache[v] = self.min_sub(v)
                for z in self.tm[v]:
                    if z in parent:
                        continue
                    c = cnt[z]
                    # A step keeps its count but starts holding v; the end grows by one.
                    end = c <= low or (sideways and c == low + 1 and self._can_grow_held(z))
                    if end and c <= ms:
                        parent[z] = (w, v)
                        found = z
                        break
                    if c <= ms + 1:
                        parent[z] = (w, v)
                        frontier.append(z)
                if found >= 0:
                    break
            if found >= 0:
                break
        if found < 0:
            return None
        moves = []
        z = found
        while z != x:
            w, v = parent[z]
            moves.append((self._pick_free(w, z, v), w, z))
            z = w
        moves.reverse()
        return moves

    def freeh_of(self, w: int) -> list[tuple[int, int]]:
        """(topic, number of free partitions of it) that member ``w`` holds."""
        return [(t, self.freeh[t].get(w, 0)) for t in self.hold[w]]

    def _pick_free(self, z: int, w: int, v: int) -> int:
        """The free partition of topic ``v`` that ``z`` should hand to ``w``: back to its owner, then locality."""
        cz, cw = self.crossk[self.cls[z]], self.crossk[self.cls[w]]
        owner, masks = self.owner, self.masks
        return min(
            (owner[gp] != w, cw[masks[gp]] - cz[masks[gp]], gp) for gp in self.hold[z][v] if owner[gp] != z
        )[2]

    def _owned_move(self, t: int, x: int, y: int) -> tuple[int, int, int]:
        cx, cy = self.crossk[self.cls[x]], self.crossk[self.cls[y]]
        masks = self.masks
        gp = min((1 - cx[masks[gp]], cy[masks[gp]], gp) for gp in self.hold[x][t])[2]
        return (gp, x, y)

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
                if (best < 0 or b < best) and not crossk[cls[b]][k] and self._can_grow(b, t):
                    best = b
            if best >= 0 and self._can_shrink(a):
                self.move(gp, best)
                moved = True
        return moved

    def _can_shrink(self, a: int) -> bool:
        """``a`` may hold one fewer: no holder of a topic it subscribes to has more than ``cnt[a]``."""
        memo = self._shrink_memo.get(a)
        if memo is not None and memo[0] == self.version:
            return memo[1]
        c = self.cnt[a]
        hold_hist = self.hold_hist
        ok = True
        for u in self.mt[a]:
            hh = hold_hist[u]
            if hh and max(hh) > c:
                ok = False
                break
        self._shrink_memo[a] = (self.version, ok)
        return ok

    def _can_grow(self, b: int, t: int) -> bool:
        """``b`` may hold one more, of topic ``t``: every topic it would hold has no subscriber below it."""
        return self.min_sub(t) >= self.cnt[b] and self._can_grow_held(b)

    def _can_grow_held(self, b: int) -> bool:
        c = self.cnt[b]
        return all(self.min_sub(u) >= c for u in self.hold[b])

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
        self._index()
        return True


def assign_general(prep: Prepared) -> list[list[int]]:
    """Partitions (global numbers) per member; see the module docstring."""
    state = _General(prep)
    state.fill()
    state._index()
    state.balance()
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
