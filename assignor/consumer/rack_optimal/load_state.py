"""The working state of ``balance: bytes`` (:mod:`.load_balance`): loads, the rule's checks, lazy heaps.

Kept apart from the steps that use it: :class:`LoadState` answers "who breaks the load rule" and "where
may a partition go" in exact integers without sorting; :class:`LazyMin` and :class:`LocalHeaps` give the
least (or roomiest) member among some, for keys that only grow.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Callable, Mapping, Sequence

#: How many of the least-loaded subscribers a repair move considers (besides each rack's least loaded).
RECEIVERS = 8


class LoadState:
    """Who holds what, member loads and each member's lightest weight per topic held (all exact integers)."""

    def __init__(self, n_mem: int, topic_subs: Mapping[str, Sequence[int]], weight: Sequence[int]) -> None:
        self.load = [0] * n_mem
        self.held: list[dict[str, set[int]]] = [{} for _ in range(n_mem)]
        self.lightest: list[dict[str, int]] = [{} for _ in range(n_mem)]
        #: each member's lightest partition over all its topics (None: holds nothing)
        self.lightest_held: list[int | None] = [None] * n_mem
        self.owner: list[int] = [-1] * len(weight)
        self.topic_subs = topic_subs
        self.weight = weight
        #: no member whose load is at most the least load plus this can break the rule
        self.min_weight = min(weight, default=0)
        # topics with the same subscribers share one subscriber list (one for equal subscriptions)
        shared: dict[tuple[int, ...], int] = {}
        self.group_of = {t: shared.setdefault(tuple(subs), len(shared)) for t, subs in topic_subs.items()}
        self.group_subs: list[Sequence[int]] = [list(subs) for subs in shared]
        self._by_rack: dict[int, dict[int, list[int]]] = {}
        #: every member's ``(load, index)``, ascending, kept up to date once the rule is first checked
        #: (steps 1 and 2 do not need it): the rule's checks then never sort
        self._ranked: list[tuple[int, int]] | None = None

    def _reload(self, i: int, new: int) -> None:
        """Member ``i``'s load becomes ``new`` (its place in :attr:`_ranked` with it)."""
        ranked = self._ranked
        if ranked is not None:
            del ranked[bisect_left(ranked, (self.load[i], i))]
            insort(ranked, (new, i))
        self.load[i] = new

    def ranked(self) -> list[tuple[int, int]]:
        """``(load, index)`` of every member, ascending."""
        if self._ranked is None:
            self._ranked = sorted((x, i) for i, x in enumerate(self.load))
        return self._ranked

    def put(self, p: int, topic: str, i: int) -> None:
        self.owner[p] = i
        w = self.weight[p]
        self._reload(i, self.load[i] + w)
        self.held[i].setdefault(topic, set()).add(p)
        light = self.lightest[i]
        if w < light.get(topic, w + 1):
            light[topic] = w
            least = self.lightest_held[i]
            if least is None or w < least:
                self.lightest_held[i] = w

    def take(self, p: int, topic: str) -> int:
        i = self.owner[p]
        w = self.weight[p]
        self._reload(i, self.load[i] - w)
        mine = self.held[i][topic]
        mine.discard(p)
        if not mine:
            del self.held[i][topic]
            del self.lightest[i][topic]
        elif self.lightest[i][topic] == w:
            self.lightest[i][topic] = min(self.weight[q] for q in mine)
        if self.lightest_held[i] == w:
            self.lightest_held[i] = min(self.lightest[i].values(), default=None)
        self.owner[p] = -1
        return i

    def violation(self) -> tuple[int, str] | None:
        """A member and topic breaking the rule (the most loaded such member, then topic), or None.

        Members are visited by decreasing load, equal loads by increasing index, from :meth:`ranked`
        (kept sorted, never re-sorted); each topic's least-loaded other subscriber is found once per
        call; a member whose lightest partition no other subscriber could take is passed over in one
        look; and the visit stops at the first load at most the least load plus the lightest weight:
        no member from there on can break the rule (``load(B) + w >= least load + lightest weight >=
        load(A)``).  Same answer as checking every member and topic (tests/assignor/test_traffic.py).
        """
        ranked = self.ranked()
        if not ranked:
            return None
        least_load = ranked[0][0]
        floor = least_load + self.min_weight
        least: dict[int, int] = {}
        end = len(ranked)
        while end > 0:
            li = ranked[end - 1][0]
            if li <= floor:
                return None
            start = bisect_left(ranked, (li, -1), 0, end)  # the members of load li, by index
            for _, i in ranked[start:end]:
                lightest = self.lightest_held[i]
                if lightest is None or least_load + lightest >= li:
                    continue  # no topic of i can: every other subscriber has at least the least load
                light = self.lightest[i]
                for t in sorted(light):
                    other = self._least_other(t, i, least)
                    if other is not None and other + light[t] < li:
                        return i, t
            end = start
        return None

    def _least_other(self, topic: str, i: int, least: dict[int, int]) -> int | None:
        """The least load of ``topic``'s subscribers other than ``i``, None when it has no other
        (``least`` caches each group's least-loaded member for one check)."""
        g = self.group_of[topic]
        subs = self.group_subs[g]
        ranked = self._ranked
        load = self.load
        j = least.get(g)
        if j is None:
            full = ranked is not None and len(subs) == len(ranked)
            j = least[g] = ranked[0][1] if full and ranked else min(subs, key=load.__getitem__)
        if j != i:
            return load[j]
        if ranked is not None and len(subs) == len(ranked):
            return ranked[1][0] if len(ranked) > 1 else None
        return min((load[k] for k in subs if k != i), default=None)

    def receivers(self, topic: str, i: int, racks: Sequence[int]) -> list[int]:
        """Where a partition of ``topic`` on ``i`` may best go: the least-loaded other subscribers, and each rack's.

        Least loaded by ``(load, index)``: the head of :meth:`ranked` when every member subscribes, else
        a stable sort of the subscribers by load; each rack's by a ``min`` over its subscribers.
        """
        g = self.group_of[topic]
        subs = self.group_subs[g]
        by_rack = self._by_rack.get(g)
        if by_rack is None:
            by_rack = self._by_rack[g] = {}
            for j in subs:
                by_rack.setdefault(racks[j], []).append(j)
        key = self.load.__getitem__
        ranked = self.ranked()
        out: set[int] = set()
        if len(subs) == len(ranked):  # every member: the head of the ranking, each rack's first in it
            racks_left = set(by_rack) - ({racks[i]} if len(by_rack[racks[i]]) == 1 else set())
            for n, (_, j) in enumerate(x for x in ranked if x[1] != i):
                if n < RECEIVERS:
                    out.add(j)
                if racks[j] in racks_left:
                    racks_left.discard(racks[j])
                    out.add(j)
                if n + 1 >= RECEIVERS and not racks_left:
                    break
            return sorted(out)
        least = sorted(subs, key=key)[: RECEIVERS + 1]
        out.update(j for j in least if j != i)
        if len(out) > RECEIVERS:
            out.remove(least[-1])
        for ms in by_rack.values():
            first = min(ms, key=key)  # the first of equal loads: the lowest index, as (load, index) orders
            if first == i:
                rest = [j for j in ms if j != i]
                if not rest:
                    continue
                first = min(rest, key=key)
            out.add(first)
        return sorted(out)

    def work(self) -> int:
        return len(self.load) + sum(len(t) for t in self.held)


class LazyMin:
    """The member of least ``key`` among some, for keys that only grow: a stale entry (its key grew since)
    is smaller than it should be, so it surfaces first and is refreshed in :meth:`top`.

    Ties go to the lowest member index, so the choice is deterministic.
    """

    def __init__(self, members: Sequence[int], key: Callable[[int], int]) -> None:
        self.key = key
        self.heap = [(key(j), j) for j in members]
        heapq.heapify(self.heap)

    def __bool__(self) -> bool:
        return bool(self.heap)

    def top(self) -> int:
        heap, key = self.heap, self.key
        while True:
            k, j = heap[0]
            now = key(j)
            if now == k:
                return j
            heapq.heapreplace(heap, (now, j))


class LocalHeaps:
    """Per (subscribers, rack bit) the subscribers a partition is local to, as a lazy heap of ``key``.

    Bit -1: the members without a rack (local to everything); bit 0: a partition with no known
    replica rack, local to every subscriber.  Keys must only grow while the heaps are used.
    """

    def __init__(
        self,
        s: LoadState,
        topic_subs: Mapping[str, Sequence[int]],
        bits: Sequence[int],
        rackless: Sequence[int],
        key: Callable[[int], int],
    ) -> None:
        self.s, self.topic_subs, self.bits, self.rackless, self.key = s, topic_subs, bits, rackless, key
        self.by_key: dict[tuple[int, int], LazyMin] = {}

    def heaps(self, t: str, mask: int) -> list[LazyMin]:
        """The non-empty heaps of the members a partition of ``t`` with replica mask ``mask`` is local to."""
        out = []
        for bit in [-1, *(1 << k for k in range(mask.bit_length()) if mask >> k & 1)] if mask else [0]:
            key = (self.s.group_of[t], bit)
            heap = self.by_key.get(key)
            if heap is None:
                if bit == 0:  # no known replica rack: everyone is local
                    ms: Sequence[int] = self.topic_subs[t]
                elif bit < 0:
                    subscribed = set(self.topic_subs[t])
                    ms = [j for j in self.rackless if j in subscribed]
                else:
                    ms = [j for j in self.topic_subs[t] if self.bits[j] == bit]
                heap = self.by_key[key] = LazyMin(ms, self.key)
            if heap:
                out.append(heap)
        return out
