"""The generation of each plan key, as read back from the plan topic and published (:class:`PlanBook`).

The record codec (keys, values, fingerprints) moved to
:mod:`rackplan.agent.protocol.plans`: import them from there (one path per name).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..protocol.plans import (
    PlanRecord,
)
from ..protocol.records import MAX_SAFE_INT

__all__ = [
    "PlanBook",
]


class PlanBook:
    """The latest plan of every key and the highest generation ever seen, tombstones included.

    Replaying the plan topic into a book before publishing is what makes
    generations resume across restarts: the next plan of a key is one more
    than the highest generation read back, even if the key was tombstoned.
    """

    def __init__(self) -> None:
        self._latest: dict[str, PlanRecord | None] = {}
        self._max_generation: dict[str, int] = {}
        self._last_live: dict[str, PlanRecord] = {}
        #: generations that may be on the topic with a content this book does not hold
        self._reserved: dict[str, int] = {}

    def reserve(self, key: str, generation: int) -> bool:
        """Never plan ``generation`` of ``key`` again: a record of it may be on the topic already.

        An uncertain delivery (a publish that timed out may still land) or a
        foreign writer's plan: the next plan of the key goes above it, so one
        generation never names two contents and followers never take ours for stale.
        False when the next generation is above it already.
        """
        if generation < self.next_generation(key):
            return False
        self._reserved[key] = generation
        return True

    def apply(self, key: str, record: PlanRecord | None) -> bool:
        """Record a plan (or a tombstone) read back or just published; False for a stale one.

        A plan whose generation is not above every generation seen for its key
        (a duplicate from an agent that lost its lease, a rogue write) is not
        the plan of record: followers ignore it the same way.
        """
        if record is not None and record.generation <= self._max_generation.get(key, 0):
            return False
        self._latest[key] = record
        if record is not None:
            self._max_generation[key] = record.generation
            self._last_live[key] = record
        return True

    def replay(self, records: Iterable[tuple[str, PlanRecord | None]]) -> list[tuple[str, int]]:
        """Apply records in topic order; the (key, generation) of the stale ones, which were ignored."""
        stale: list[tuple[str, int]] = []
        for key, record in records:
            if not self.apply(key, record) and record is not None:
                stale.append((key, record.generation))
        return stale

    def latest(self, key: str) -> PlanRecord | None:
        return self._latest.get(key)

    def last_live(self, key: str) -> PlanRecord | None:
        """The newest plan of a key even if a tombstone followed it: what its members may still hold."""
        return self._last_live.get(key)

    def next_generation(self, key: str) -> int:
        return max(self._max_generation.get(key, 0), self._reserved.get(key, 0)) + 1

    def exhausted(self, key: str) -> bool:
        """The next generation of ``key`` would pass 2**53-1, which every reader refuses: no plan for it.

        Generations are bounded when read (:func:`rackplan.agent.protocol.records.safe_int`) and
        never produced above the bound: one at 2**53-1 (a forged record, without a secret) ends the key.
        """
        return self.next_generation(key) > MAX_SAFE_INT

    def exhausted_keys(self) -> list[str]:
        """Keys whose generations are exhausted (:meth:`exhausted`); sorted."""
        return sorted(k for k in set(self._max_generation) | set(self._reserved) if self.exhausted(k))

    def live_keys(self) -> list[str]:
        """Keys whose latest record is a plan, not a tombstone; sorted."""
        return sorted(k for k, r in list(self._latest.items()) if r is not None)  # list(): HTTP thread reads
