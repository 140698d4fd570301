"""The min-cost flow's primal-dual phases compiled (``_flowcore.c``), where this install has them.

:func:`.mincost._phases` hands each problem to the core and solves in Python what it hands
back (issue 29: the Python phases cost about 1.3 ms a flow on the cooperative-sticky settling's
graphs).  The extension is optional in the build: a wheel built without a C compiler, or the
package imported from a zip (fleet's Spark mode), has none, and the Python solver is the one.
"""

from __future__ import annotations

#: ``typing.TYPE_CHECKING`` without importing ``typing`` at start-up (issue 29); mypy reads the name as it.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Sequence
    from collections.abc import Set as AbstractSet
    from typing import Protocol

    class Core(Protocol):
        """The extension module's surface (``_flowcore.pyi``)."""

        SOLVED: int
        CUT_OFF: int
        INFEASIBLE: int
        FALLBACK: int

        def solve(
            self,
            num_nodes: int,
            edges: Sequence[tuple[int, int, int, int]],
            supply: Sequence[int],
            cutoff: int | None,
            /,
        ) -> tuple[int, int | None, list[int] | int | None]: ...

        def pool_edges(
            self,
            pools: list[tuple[tuple[int, int, int, bool], list[int]]],
            edges: list[tuple[int, int, int, int]],
            supply: list[int],
            cnt: list[int],
            min_sub: list[int],
            member_node: dict[int, int],
            spare_of: dict[int, int],
            grows: dict[int, set[int]],
            room: int,
            hub_nodes: list[list[int]],
            crossk: list[dict[int, int]],
            cls: list[int],
            classes: list[tuple[int, ...]],
            big: int,
            /,
        ) -> list[tuple[list[int], int, int, list[int]]] | None: ...

        def read_back(
            self,
            holder: list[int],
            pools: list[tuple[tuple[int, int, int, bool], list[int]]],
            pool_edges: list[tuple[list[int], int, int, list[int]]],
            flow: list[int],
            edges: list[tuple[int, int, int, int]],
            hub_edges: int,
            node_member: dict[int, int],
            num_nodes: int,
            /,
        ) -> list[int] | None: ...

        def members_and_hubs(
            self,
            n_topics: int,
            n: int,
            tm: list[list[int]],
            cnt: list[int],
            min_sub: list[int],
            drops: set[int],
            cls: list[int],
            supply: list[int],
            edges: list[tuple[int, int, int, int]],
            hubs: dict[tuple[int, int], int],
            member_node: dict[int, int],
            /,
        ) -> dict[int, int] | None: ...

        def floor_cost(
            self,
            pools: list[tuple[tuple[int, int, int, bool], list[int]]],
            cnt: list[int],
            min_sub: list[int],
            spare_of: dict[int, int],
            grows: dict[int, set[int]],
            crossk: list[dict[int, int]],
            cls: list[int],
            classes: list[tuple[int, ...]],
            big: int,
            /,
        ) -> int | None: ...

        def spare_units(
            self,
            drops: AbstractSet[int],
            losers: AbstractSet[int],
            banned: AbstractSet[int],
            gainer: int,
            cnt: list[int],
            min_sub: list[int],
            mt: list[list[int]],
            cls: list[int],
            supply: list[int],
            edges: list[tuple[int, int, int, int]],
            hubs: dict[tuple[int, int], int],
            member_node: dict[int, int],
            spare_of: dict[int, int],
            grows: dict[int, set[int]],
            node_member: dict[int, int],
            /,
        ) -> int | None: ...

        def constrained(
            self,
            masks: list[int],
            owner: list[int],
            member_class: list[int],
            classes: list[tuple[bool, int]],
            /,
        ) -> list[int] | None: ...

        def constrained_settle(
            self,
            masks: list[int],
            owner: list[int],
            claim: list[int],
            member_class: list[int],
            classes: list[tuple[bool, int]],
            max_rounds: int,
            /,
        ) -> tuple[list[int], bool, int] | None: ...

        def withhold(
            self,
            holder: list[int],
            claim: list[int],
            contested: dict[int, list[int]],
            member_ids: list[str],
            topics: list[str],
            topic_offset: list[int],
            /,
        ) -> tuple[dict[str, list[tuple[str, int]]], dict[str, list[tuple[str, int]]]] | None: ...

        def rack_and_fill(
            self, masks: Sequence[int], consumers: list[int], keys: list[int], per: int, extra: int, /
        ) -> tuple[list[int], list[int], int, int] | None: ...


def load() -> Core | None:
    """The compiled core, or None where it was not built or cannot be loaded."""
    try:
        from . import _flowcore
    except ImportError:
        return None
    return _flowcore


CORE = load()
