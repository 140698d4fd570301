"""The compiled primal-dual phases (``_flowcore.c``): :func:`rackplan.assignor.flow.mincost._phases` in C."""

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

SOLVED: int
CUT_OFF: int
INFEASIBLE: int
FALLBACK: int

def solve(
    num_nodes: int, edges: Sequence[tuple[int, int, int, int]], supply: Sequence[int], cutoff: int | None, /
) -> tuple[int, int | None, list[int] | int | None]:
    """``(SOLVED, cost, flow)``, ``(CUT_OFF, None, None)``, ``(INFEASIBLE, sent, need)`` or
    ``(FALLBACK, None, None)`` (outside the core's 64-bit domain: solve it in Python)."""

def pool_edges(
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
) -> list[tuple[list[int], int, int, list[int]]] | None:
    """``sticky.general_edges.pool_edges_py`` appending the same nodes and edges, or None having appended
    nothing (anything it cannot take as the Python does: the Python builds them then)."""

def read_back(
    holder: list[int],
    pools: list[tuple[tuple[int, int, int, bool], list[int]]],
    pool_edges: list[tuple[list[int], int, int, list[int]]],
    flow: list[int],
    edges: list[tuple[int, int, int, int]],
    hub_edges: int,
    node_member: dict[int, int],
    num_nodes: int,
    /,
) -> list[int] | None:
    """``sticky.general_readback.read_back_py``'s holder (``_readback.c``), or None (anything it cannot take
    as the Python does: the Python reads the flow back then, with its own result or error)."""

def members_and_hubs(
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
) -> dict[int, int] | None:
    """``sticky.general_nodes.members_and_hubs_py``'s nodes, edges and dict entries (``_nodes.c``) and its
    answer, or None with nothing made (anything it cannot take as the Python does, lists or dicts not
    empty among them: the Python makes them then, with its own result or error)."""

def floor_cost(
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
) -> int | None:
    """``sticky.general_floor.floor_cost_py``'s floor (``_shift.c``), or None (anything it cannot take as the
    Python does: the Python answers then, with its own result or error)."""

def spare_units(
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
) -> int | None:
    """``sticky.general_spare.spare_units_py``'s nodes, edges and dict entries (``_shift.c``) and its room, or
    None with nothing made (anything it cannot take as the Python does, ``spare_of`` or ``grows`` not empty
    among them: the Python makes them then, with its own result or error)."""

def rack_and_fill(
    masks: Sequence[int], consumers: list[int], keys: list[int], per: int, extra: int, /
) -> tuple[list[int], list[int], int, int] | None:
    """``range_assignor._rack_pass_py`` then ``_fill`` on a topic nothing is assigned in yet: ``(owner,
    counts, extra, assigned)``, counts in the order of ``consumers``; or None (anything it cannot take as
    the Python does)."""

def constrained(
    masks: list[int], owner: list[int], member_class: list[int], classes: list[tuple[bool, int]], /
) -> list[int] | None:
    """``sticky.constrained.assign_constrained``'s holder of each partition (``_constrained.c``), or None
    (anything it cannot take as the Python does: the Python answers then, with its own result or error)."""

def withhold(
    holder: list[int],
    claim: list[int],
    contested: dict[int, list[int]],
    member_ids: list[str],
    topics: list[str],
    topic_offset: list[int],
    /,
) -> tuple[dict[str, list[tuple[str, int]]], dict[str, list[tuple[str, int]]]] | None:
    """``sticky.plan.withhold_py``'s assignment and revoked (``_withhold.c``), or None (anything it cannot take
    as the Python does: the Python answers then, with its own result or error)."""

def constrained_settle(
    masks: list[int],
    owner: list[int],
    claim: list[int],
    member_class: list[int],
    classes: list[tuple[bool, int]],
    max_rounds: int,
    /,
) -> tuple[list[int], bool, int] | None:
    """``sticky.settling``'s search with the equal path as its algorithm (``_constrained.c``): ``(holder,
    fixed_point, rounds)``, or None (anything it cannot take as the Python does: the Python settles then)."""
