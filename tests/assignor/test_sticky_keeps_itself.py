"""The equal path's proof that a holder fed back as everyone's ownership comes back unchanged.

``settle`` used to simulate that round on every call, as costly as the round itself; now
:func:`~rackplan.assignor.consumer.sticky.constrained.keeps_itself` spares it when it can prove the
answer.  Checked here against the round it replaces (random equal groups, their own targets and
random balanced deals, local or not), :func:`fewest_cross` against brute force, and ``settle`` with
and without the proof (the same target).
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rackplan.assignor.consumer.sticky import settling
from rackplan.assignor.consumer.sticky.common import Prepared, cross_count, prepare
from rackplan.assignor.consumer.sticky.constrained import assign_constrained, fewest_cross, keeps_itself
from rackplan.assignor.model import Cluster, ConsumerGroup
from rackplan.assignor.record import replace
from tests.strategies import clusters, consumer_groups

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def equal_groups(draw: st.DrawFn, max_partitions: int = 8) -> tuple[Cluster, ConsumerGroup]:
    cluster = draw(clusters(max_partitions=max_partitions))
    group = draw(consumer_groups(cluster, "cooperative-sticky", equal_subscriptions=True))
    assume(group.members)
    prep = prepare(cluster, group)
    assume(prep.num_partitions)
    return cluster, group


def fed_back(prep: Prepared, holder: list[int]) -> list[int]:
    """The round the proof stands for: every member owning (and claiming) what ``holder`` gives it."""
    owned = replace(prep, owner=holder, claim_owner=holder, min_cross_holder=None)
    return settling.holders(assign_constrained(owned), prep.num_partitions)


@st.composite
def balanced_deal(draw: st.DrawFn, prep: Prepared) -> list[int]:
    """A random holder with ``q`` or ``q + 1`` per member, ``r`` at ``q + 1``: local or not."""
    n = len(prep.member_ids)
    q, r = divmod(prep.num_partitions, n)
    up = set(draw(st.permutations(range(n)))[:r])
    slots = [i for i in range(n) for _ in range(q + (i in up))]
    return list(draw(st.permutations(slots)))


@SETTINGS
@given(equal_groups(), st.data())
def test_a_proven_holder_is_what_the_round_answers(
    inst: tuple[Cluster, ConsumerGroup], data: st.DataObject
) -> None:
    """Whenever ``keeps_itself`` says so, the real round returns that holder; a target with no cross-rack
    partition is always proven (no flow needed)."""
    prep = prepare(*inst)
    target = settling.holders(assign_constrained(prep), prep.num_partitions)
    if not cross_count(prep, target):
        assert keeps_itself(prep, target)
    for holder in (target, data.draw(balanced_deal(prep))):
        if keeps_itself(prep, holder):
            assert fed_back(prep, holder) == holder


@SETTINGS
@given(equal_groups(), st.data())
def test_a_less_local_or_unbalanced_holder_is_not_proven(
    inst: tuple[Cluster, ConsumerGroup], data: st.DataObject
) -> None:
    """The proof refuses what it cannot stand for: more cross-rack than the fewest, a count off ``q``."""
    prep = prepare(*inst)
    holder = data.draw(balanced_deal(prep))
    crossed = cross_count(prep, holder)
    assert keeps_itself(prep, holder) == (crossed == fewest_cross(prep))
    n = len(prep.member_ids)
    if n > 1 and prep.num_partitions % n == 0:  # every member at q >= 1: one partition handed over
        moved = list(holder)
        moved[moved.index(0)] = 1
        assert not keeps_itself(prep, moved)  # member 1 at q + 1, member 0 at q - 1
    assert not keeps_itself(prep, [-1, *holder[1:]])


@SETTINGS
@given(st.data())
def test_cross_count_is_the_per_partition_rule(data: st.DataObject) -> None:
    """``cross_count`` (member bits, one pass) counts what :meth:`Prepared.cross` says partition by
    partition, on any group (unequal ones, members without a rack or in a rack with no broker)."""
    cluster = data.draw(clusters(max_partitions=8))
    group = data.draw(consumer_groups(cluster, "cooperative-sticky"))
    assume(group.members)
    prep = prepare(cluster, group)
    n = len(prep.member_ids)
    holder = data.draw(
        st.lists(st.integers(0, n - 1), min_size=prep.num_partitions, max_size=prep.num_partitions)
    )
    by_rule = sum(prep.cross(prep.member_class[h], prep.part_mask[gp]) for gp, h in enumerate(holder))
    assert cross_count(prep, holder) == by_rule


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(equal_groups(max_partitions=3))
def test_fewest_cross_is_the_brute_force_minimum(inst: tuple[Cluster, ConsumerGroup]) -> None:
    """Over every holder with the path's counts, on groups small enough to list them all."""
    prep = prepare(*inst)
    n, total = len(prep.member_ids), prep.num_partitions
    assume(n**total <= 20_000)
    q, r = divmod(total, n)
    best = None
    for holder in itertools.product(range(n), repeat=total):
        count = [holder.count(i) for i in range(n)]
        if any(c not in (q, q + 1) for c in count) or count.count(q + 1) != r:
            continue
        crossed = cross_count(prep, list(holder))
        best = crossed if best is None else min(best, crossed)
    assert fewest_cross(prep) == best


@SETTINGS
@given(equal_groups())
def test_settle_lands_on_the_same_target_with_the_proof(inst: tuple[Cluster, ConsumerGroup]) -> None:
    """The proof only spares a simulation: same holder, same fixed point, same rounds counted."""
    prep = prepare(*inst)
    plain = settling.settle(prep, settling.unproven)
    proved = settling.settle(prep, settling.unproven, (), keeps_itself)
    assert proved == plain
