"""Stand-ins for the AdminClient's description objects, for tests and benchmarks without a broker."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any


@dataclass
class Node:
    id: int
    rack: str | None = None


@dataclass
class Part:
    id: int
    leader: Node | None
    replicas: list[Node]
    #: in-sync replicas: all of them unless a test says otherwise
    isr: list[Node] | None = None

    def __post_init__(self) -> None:
        if self.isr is None:
            self.isr = list(self.replicas)


@dataclass
class Desc:
    partitions: list[Part]


def done(v: Any) -> Future[Any]:
    """A future that already holds ``v``, as the AdminClient's calls return."""
    f: Future[Any] = Future()
    f.set_result(v)
    return f
