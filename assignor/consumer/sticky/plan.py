"""cooperative-sticky: Kafka's CooperativeStickyAssignor (KIP-54, KIP-429) with better rack locality (KIP-881).

Priorities, as in Kafka: balance first, then stickiness, then rack locality,
except that an owned partition in the wrong rack is moved when, and only when,
that lowers the number of cross-rack partitions.  Kafka instead revokes *every*
owned partition whose rack does not match and deals them again, which moves
many partitions for nothing when some must stay cross-rack anyway (one member
of 2,100 leaving a 60/30/10 group with one replica per partition: Kafka moves
~560, we move at most one; both end with the same cross-rack count).

Input and output.  Previous owners follow :mod:`rackplan.assignor.consumer.owned` (older
generations dropped, a partition claimed twice in the newest generation is
unowned); an owned partition can only be kept if its owner still subscribes to
the topic.  Cross-rack is the contract's notion (a partition with no known
replica rack is never cross-rack), whether or not Kafka would switch its rack
logic on.  We compute the whole target, then every partition changing owner is
withheld and listed under ``revoked`` (:func:`withhold`: the rule of
:func:`rackplan.assignor.consumer.owned.withhold_moving` on numbers).
Members are numbered in sorted-id order, partitions in (topic, partition)
order, and ties go to the lowest number: the output is deterministic.

Equal subscriptions (:mod:`rackplan.assignor.consumer.sticky.constrained`).  Every member gets
``q = P // N`` or ``q + 1`` partitions, ``P % N`` of them ``q + 1``.  Write
``L(m)`` for the owned partitions that *match* ``m``'s rack as Kafka's
``racksMismatch`` sees it (``m`` has no rack, or a replica is in its rack),
and ``R`` for the balanced assignments in which every member keeps at least
``min(|L(m)|, cap(m))`` of ``L(m)``, ``cap(m)`` being its final count.  One
exact min-cost flow returns the member of ``R`` with the fewest cross-rack
partitions and, among those, the fewest moves: cost ``BIG * cross + moves``.

* Kafka's result lies in ``R``, whatever order it visits members in: its
  first step keeps, of each member's matching owned partitions, all of them
  below ``minQuota``, ``maxQuota`` of them while ``maxQuota`` slots remain,
  ``minQuota`` otherwise; later steps only add partitions, and the result is
  balanced (Kafka 3.5.1+, after KAFKA-15170).  It keeps nothing else owned
  that ``R`` would forbid, since ``R`` forbids nothing but releasing matching
  partitions.
* Hence, on the same previous owners, our target is *lexicographically no
  worse* than Kafka's (fewer cross-rack partitions; or as many and no more
  moves): the flow's optimum over ``R`` is, and the settling below changes
  the target only with no more moves at equal cross-rack, or with strictly
  fewer cross-rack partitions.  So we never have more cross-rack partitions
  than Kafka's target, and never move more unless we end with strictly fewer
  cross-rack partitions (measured against a model of Kafka: in 2.4% of small
  random cases, mostly one extra move per cross-rack partition saved).

Unequal subscriptions (:mod:`rackplan.assignor.consumer.sticky.general`).  Kafka's balance rule
is then a local condition; there is no exact flow over all balanced
assignments.  We keep owned partitions, deal the rest to least-loaded
subscribers, restore balance with free partitions before owned ones, then
place every partition optimally at the counts reached with an exact flow (an
owned partition moves only if that lowers the final cross-rack count), and
search over counts with the same flow (*count shifts*, the moves by which
Kafka's balancing sometimes ends more local).  Unlike Kafka's general path,
which hands a balancing move to the least-loaded member whatever its rack,
receivers and partitions are chosen to stay rack-aligned.  This is a local
search, not a proof (small groups also get the exact optimum as a candidate in
:func:`~.general_settle.settle_general`): "never worse than Kafka" is measured against Kafka's own
assignor (``tests/assignor/test_vs_kafka_java.py``, docs/assignors.md).

Settling: :mod:`.settling` (equal subscriptions), :mod:`.general_settle` (unequal).
"""

from __future__ import annotations

from ...flow import PostconditionError
from ...flow.compiled import CORE
from ...model import Cluster, ConsumerGroup, ConsumerPlan
from .common import Prepared, prepare
from .constrained import compiled_search, keeps_itself
from .settling import settle, unproven


def assign(cluster: Cluster, group: ConsumerGroup) -> ConsumerPlan:
    """The cooperative-sticky plan of ``group``: this round's assignment and what is revoked."""
    if not group.members:
        return ConsumerPlan(assignment={}, revoked={})
    prep = prepare(cluster, group)
    equal = len({m.topics for m in group.members}) == 1
    if equal:
        settled = settle(prep, unproven, prep.contested, keeps_itself, compiled_search)
    else:  # the unequal path's modules are imported by the groups that take it (issue 29: start-up)
        from .general_settle import settle_general

        settled = settle_general(prep, prep.contested)
    if not settled.fixed_point:
        import logging  # only here: ``rackplan assign`` on a consumer group never imports it otherwise

        logging.getLogger(__package__).warning(
            "cooperative-sticky: group %s has no fixed point after %d follow-up simulations; "
            "its real follow-up round may move partitions again",
            group.group_id,
            settled.follow_ups,
        )
    holder = settled.holder
    if len(holder) != prep.num_partitions or -1 in holder:
        gp = holder.index(-1) if -1 in holder else len(holder)
        raise PostconditionError(
            f"cooperative-sticky: {holder.count(-1)} of {prep.num_partitions} partitions have no holder "
            f"after settling (first: global partition {gp}); every subscribed partition must have one"
        )
    return withhold(prep, holder)


def withhold(prep: Prepared, holder: list[int]) -> ConsumerPlan:
    """The plan of a target ``holder`` (:func:`withhold_py`), from the compiled core where the install has
    it (``_withhold.c``: the Python's loop and pair per partition weigh on small groups' calls; issue 29,
    docs/performance.md, session 38)."""
    if CORE is not None:
        lists = CORE.withhold(
            holder, prep.claim_owner, prep.contested, prep.member_ids, prep.topics, prep.topic_offset
        )
        if lists is not None:
            return ConsumerPlan(assignment=lists[0], revoked=lists[1])
    return withhold_py(prep, holder)


def withhold_py(prep: Prepared, holder: list[int]) -> ConsumerPlan:
    """The plan of a target ``holder``: :func:`rackplan.assignor.consumer.owned.withhold_moving` on numbers.

    A partition whose valid claimer is another member is withheld and listed under that claimer's
    ``revoked``; a contested one under every claimer's.  Partitions are visited in global order, which is
    (topic, partition) order, so every list comes out sorted, and members are numbered in sorted-id order,
    so ``revoked`` is sorted by member id: the same plan ``withhold_moving`` makes of the same target
    (``tests/assignor/test_sticky_withhold.py``), without a lookup per partition in maps keyed by
    (topic, partition) pairs.
    """
    n = len(prep.member_ids)
    kept: list[list[int]] = [[] for _ in range(n)]
    revoked: list[list[int]] = [[] for _ in range(n)]
    claim, contested = prep.claim_owner, prep.contested
    for gp, (h, prev) in enumerate(zip(holder, claim, strict=True)):
        if prev == -1 or prev == h:
            if prev == -1 and gp in contested:  # a contested partition has no valid claimer
                for claimer in contested[gp]:
                    revoked[claimer].append(gp)
            else:
                kept[h].append(gp)
        else:
            revoked[prev].append(gp)
    offset = prep.topic_offset
    pairs = [(t, p) for tk, t in enumerate(prep.topics) for p in range(offset[tk + 1] - offset[tk])]
    pair = pairs.__getitem__
    ids = prep.member_ids
    return ConsumerPlan(
        assignment={ids[i]: list(map(pair, gps)) for i, gps in enumerate(kept)},
        revoked={ids[i]: list(map(pair, gps)) for i, gps in enumerate(revoked) if gps},
    )
