"""The mutable state of the general cooperative-sticky path and the indexes that keep its steps cheap.

Shared by the balancing step (:mod:`rackplan.assignor.consumer.sticky.general_balance`) and the
fill and locality steps (:mod:`rackplan.assignor.consumer.sticky.general`): every move goes
through :meth:`GeneralState.move`, which keeps the per-topic histograms
(count -> members) in step, so balance checks never rescan all members.
"""

from __future__ import annotations

from .common import Prepared
from .general_pools import FlowCache


class GeneralState:
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
        #: keep-first run: partitions with their owner stay (balancing's forced moves aside)
        self.keep_owned = prep.keep_owned
        self.mt = prep.member_topics
        self.tm = prep.topic_members
        mask_set = sorted(set(self.masks))
        # Prepared.cross written out: classes x masks entries, millions where every broker is its own
        # rack (a call per entry, and a twin table of Prepared.matches nothing read, were seconds there)
        self.crossk = [
            {k: 1 if k and not k & bit else 0 for k in mask_set} if has else dict.fromkeys(mask_set, 0)
            for has, bit in prep.classes
        ]
        self.holder = list(self.owner if prep.start is None else prep.start)
        #: a holder proven to have the fewest cross-rack partitions at its counts (see place)
        self.min_cross_holder: list[int] | None = prep.min_cross_holder
        self.cnt = [0] * self.n
        for o in self.holder:
            if o >= 0:
                self.cnt[o] += 1
        # built by reindex()
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
        #: what the count-shift flows keep between calls (general_pools.FlowCache)
        self.flow_cache = FlowCache()
        #: count shifts that found nothing, as (version searched, edges charged): a first loser's
        #: search by member, and the all-at-once search ((-1, 0): none).  Each is a function of the
        #: holder, so at the same version it would find nothing again for the same charge (general_shift)
        self.shift_failed: dict[int, tuple[int, int]] = {}
        self.free_shift_failed = (-1, 0)
        #: general_shift._avoidable_cross's answer, at the version it was asked (-1: never)
        self.avoidable = (-1, False)
        #: per topic, the replica bits some subscriber is local to (Prepared.topic_local_bits)
        self.local_bits = prep.topic_local_bits()

    def reindex(self) -> None:
        """Rebuild every index from ``holder`` and ``cnt`` (after filling, or after the flow re-placed partitions).

        A new version too: a flow re-places partitions without :meth:`move`, and a balance check or a
        failed count shift memoised at the old holder must not answer for the new one.
        """
        self.version += 1
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
        """The lowest count among the subscribers of topic ``t``."""
        return min(self.sub_hist[t])

    def can_shrink(self, a: int) -> bool:
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

    def can_grow(self, b: int, t: int) -> bool:
        """``b`` may hold one more, of topic ``t``: every topic it would hold has no subscriber below it."""
        return self.min_sub(t) >= self.cnt[b] and self.can_grow_held(b)

    def can_grow_held(self, b: int) -> bool:
        """``b`` may hold one more of a topic it already holds: no such topic has a subscriber below it."""
        c = self.cnt[b]
        return all(self.min_sub(u) >= c for u in self.hold[b])
