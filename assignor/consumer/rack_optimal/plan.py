"""rack-optimal: the fewest cross-rack partitions a balanced assignment can have, then the fewest moves.

Exactness, precisely: the result minimises the number of cross-rack
partitions over *every* assignment the contract calls balanced (invariant 2),
and among those the moves (valid owned partitions, see :mod:`rackplan.assignor.consumer.owned`,
whose owner still subscribes to the topic but that go to another member).

* Equal subscriptions: balanced means counts ``floor(P/N)`` or ``ceil(P/N)``,
  which are exactly the *fair* assignments (minimal sum of squared counts);
  :func:`fair_assign` (stages A and B below) is the whole algorithm.
* Unequal subscriptions: "no partition can move to a subscriber holding at
  least two fewer" is a local either/or condition, and a less even balanced
  assignment can beat every fair one: members A {t1}, B {t1, t2}, C {t2}, two
  partitions of t1 local only to A, one of t2 local only to B, C in a third
  rack: counts (2, 1, 0) are balanced with no cross-rack partition, while
  every fair assignment (1, 1, 1) has two.  :func:`fair_assign` gives a
  balanced starting point and :mod:`rackplan.assignor.consumer.rack_optimal.balanced` makes the
  result exact over all balanced assignments (a per-component bound, else a
  mixed-integer program, :mod:`rackplan.assignor.consumer.rack_optimal.milp`) within a
  deterministic work budget.  That problem is NP-hard (``tests/hard_instances.py``
  reduces 3-SAT to it), so no budget makes it exact at every size: where the
  program proves nothing, exact programs over a few members at a time
  (:mod:`rackplan.assignor.consumer.rack_optimal.neighbourhood`) improve the plan.
  The plan's ``stats`` say ``optimal`` (proven); when not, the plan is still
  balanced, never worse than the fair optimum nor than the general
  cooperative-sticky search, and ``cross_rack_lower_bound`` is a proven bound
  for any balanced plan.

The objectives: ``balance: bytes`` is :mod:`.load_balance`, ``objective: bytes``
with count balance :mod:`.bytes_objective`, the partition objective
:mod:`.class_flow` (stages A and B) then, with unequal subscriptions,
:mod:`.balanced`.
"""

from __future__ import annotations

from ...model import Cluster, ConsumerGroup, ConsumerPlan
from ...record import replace
from .class_flow import fair_assign


def assign(cluster: Cluster, group: ConsumerGroup) -> ConsumerPlan:
    """The rack-optimal plan of ``group``; its ``stats`` say whether it is proven optimal (module docstring).

    ``balance: bytes`` is :mod:`.load_balance`; ``objective: bytes`` with count
    balance is :mod:`.bytes_objective`.  Neither runs without those choices, so
    plans of instances that make none stay exactly as before.
    """
    group = _as_weighed(cluster, group)
    # Each objective's modules are imported by the groups that choose it: an equal-subscription group
    # never loads the integer programs nor the cooperative-sticky search (issue 29: start-up).
    if group.balance == "bytes":
        from .load_balance import assign_by_load

        return assign_by_load(cluster, group)
    if group.objective == "bytes":
        from .bytes_objective import assign_bytes

        return assign_bytes(cluster, group)
    plan = fair_assign(cluster, group)
    if len({m.topics for m in group.members}) > 1:  # unequal: from the fair optimum to the balanced one
        from .balanced import rebalance

        assignment, outcome = rebalance(cluster, group, plan.assignment)
        stats: dict[str, bool | int | float] = {"optimal": outcome.optimal}
        if not outcome.optimal:
            stats["cross_rack_lower_bound"] = outcome.cross_rack_lower_bound
        return ConsumerPlan(assignment=assignment, revoked={}, stats=stats)
    return ConsumerPlan(assignment=plan.assignment, revoked={}, stats={"optimal": True})


def _as_weighed(cluster: Cluster, group: ConsumerGroup) -> ConsumerGroup:
    """``group`` with the traffic choices that actually weigh something, the defaults where they cannot.

    Without ``cluster.traffic`` every partition weighs the same (1, plus the floor), so ``objective:
    bytes`` counts partitions and ``balance: bytes`` is the count rule: the defaults' paths run, and
    the output is the defaults' byte for byte, with no byte-named figure (the contract: without
    traffic, nothing changes).  With traffic but every partition's bytes/s the same, every w(p) is
    the same and the load rule *is* invariant 2's count rule (``load(B) + w < load(A)`` is
    ``count(B) + 1 < count(A)`` for any w > 0); for w = 0 everywhere (idle topics, ``balance_floor:
    0``) the contract's "equal weights give invariant 2" can only mean that rule, since the load
    rule alone would allow any plan at all.
    """
    if cluster.traffic is None:
        if group.objective == "partitions" and group.balance == "count":
            return group
        return replace(group, objective="partitions", balance="count")
    if group.balance != "bytes":
        return group
    from ...traffic import group_weights  # only here: the default choices never import it (issue 29)

    weights = group_weights(cluster, {t for m in group.members for t in m.topics})
    return (
        replace(group, balance="count") if len({x for row in weights.values() for x in row}) <= 1 else group
    )
