"""Consumer groups built from 3-CNF formulas: why exact rack-optimality over balanced plans is NP-hard.

The contract calls an assignment balanced when no partition can move to a
subscriber of its topic holding at least two fewer partitions (invariant 2).
Deciding whether some balanced assignment has no cross-rack partition at all
is NP-complete, even with two racks, one replica per partition and one
partition per topic.  The reduction (from 3-SAT) is built here, so that the
tests can check it against brute force and a SAT oracle, and the benchmarks
can run Kafka's assignors and ours on instances whose answer is known.

For a formula over variables ``x1..xn`` with clauses ``C1..Cm``:

* two racks: ``ra`` (broker 1) and ``rb`` (broker 2);
* per variable ``i``: members ``T<i>`` and ``F<i>`` in rack ``rb``, both
  subscribed to topic ``v<i>``, whose one partition lives in ``rb``;
* per clause ``j`` and literal position ``k``: a *selector* ``s<j>_<k>`` in
  rack ``ra``, subscribed to its own topic ``r<j>_<k>`` (one partition in
  ``ra``) and to the clause topic ``q<j>`` (one partition in ``ra``); the
  member of the literal (``T<i>`` for ``xi``, ``F<i>`` for ``not xi``) also
  subscribes to ``r<j>_<k>``, from the wrong rack.

With no cross-rack partition, ``v<i>`` goes to ``T<i>`` or ``F<i>`` (the
variable's value), ``r<j>_<k>`` to its selector and ``q<j>`` to one selector,
which then holds two partitions.  Balance lets it keep ``r<j>_<k>`` only if
the literal's member holds at least one, that is, only if the literal is
true.  So a plan with no cross-rack partition is balanced exactly when every
clause's chosen literal is true: such a plan exists if and only if the
formula is satisfiable.  A satisfying assignment gives the plan directly
(``planted_plan``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from rackplan.assignor.model import Cluster, ConsumerGroup, Member, TopicPartition

Literal = int  # +i is x_i, -i is not x_i (1-based, as DIMACS)
Formula = tuple[tuple[Literal, ...], ...]


def literal_member(lit: Literal) -> str:
    return f"T{lit}" if lit > 0 else f"F{-lit}"


def formula_group(
    variables: int, clauses: Formula, assignor: str = "rack-optimal"
) -> tuple[Cluster, ConsumerGroup]:
    """The consumer group of the reduction for ``clauses`` over ``variables`` variables."""
    topics: dict[str, tuple[tuple[int, ...], ...]] = {}
    subs: dict[str, list[str]] = {}
    racks: dict[str, str] = {}
    for i in range(1, variables + 1):
        topics[f"v{i}"] = ((2,),)
        for name in (f"T{i}", f"F{i}"):
            racks[name] = "rb"
            subs[name] = [f"v{i}"]
    for j, clause in enumerate(clauses, start=1):
        topics[f"q{j}"] = ((1,),)
        for k, lit in enumerate(clause, start=1):
            if not 1 <= abs(lit) <= variables:
                raise ValueError(f"clause {j} names variable {abs(lit)} outside 1..{variables}")
            selector, own = f"s{j}_{k}", f"r{j}_{k}"
            topics[own] = ((1,),)
            racks[selector] = "ra"
            subs[selector] = [own, f"q{j}"]
            subs[literal_member(lit)].append(own)
    cluster = Cluster(broker_racks={1: "ra", 2: "rb"}, topics=topics)
    members = tuple(Member(name, racks[name], tuple(sorted(subs[name]))) for name in sorted(subs))
    return cluster, ConsumerGroup(group_id="sat", assignor=assignor, members=members)


def satisfies(values: Mapping[int, bool], clauses: Formula) -> bool:
    return all(any(values[abs(lit)] == (lit > 0) for lit in clause) for clause in clauses)


def satisfiable(variables: int, clauses: Formula) -> bool:
    """Brute force over every assignment of the variables (small formulas only)."""
    for bits in range(1 << variables):
        values = {i: bool(bits >> (i - 1) & 1) for i in range(1, variables + 1)}
        if satisfies(values, clauses):
            return True
    return False


def planted_plan(
    variables: int, clauses: Formula, values: Mapping[int, bool]
) -> dict[str, list[TopicPartition]]:
    """The balanced, all-local plan a satisfying assignment ``values`` gives."""
    if not satisfies(values, clauses):
        raise ValueError("values do not satisfy the formula")
    plan: dict[str, list[TopicPartition]] = {}
    for i in range(1, variables + 1):
        plan[f"T{i}"] = [(f"v{i}", 0)] if values[i] else []
        plan[f"F{i}"] = [] if values[i] else [(f"v{i}", 0)]
    for j, clause in enumerate(clauses, start=1):
        chosen = next(k for k, lit in enumerate(clause, start=1) if values[abs(lit)] == (lit > 0))
        for k in range(1, len(clause) + 1):
            plan[f"s{j}_{k}"] = [(f"r{j}_{k}", 0)] + ([(f"q{j}", 0)] if k == chosen else [])
    return {name: sorted(parts) for name, parts in plan.items()}


def random_formula(
    rng: random.Random, variables: int, clauses: int, widths: tuple[int, ...] = (3,)
) -> Formula:
    """Random CNF: each clause of a width drawn from ``widths``, distinct variables, random signs."""
    return tuple(
        tuple(
            v if rng.random() < 0.5 else -v
            for v in rng.sample(range(1, variables + 1), min(rng.choice(widths), variables))
        )
        for _ in range(clauses)
    )


def planted_formula(rng: random.Random, variables: int, clauses: int) -> tuple[Formula, dict[int, bool]]:
    """A random 3-CNF with a hidden satisfying assignment (clauses it falsifies are redrawn)."""
    values = {i: rng.random() < 0.5 for i in range(1, variables + 1)}
    out: list[tuple[Literal, ...]] = []
    while len(out) < clauses:
        clause = random_formula(rng, variables, 1)[0]
        if satisfies(values, (clause,)):
            out.append(clause)
    return tuple(out), values
