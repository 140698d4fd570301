"""cooperative-sticky's plan from a target, on numbers (issue 29): ``prepare``'s claims and
``plan.withhold`` against :mod:`rackplan.assignor.consumer.owned`, the rules every sticky-aware
assignor shares.

Groups are drawn with what the shared strategy leaves out: members of older generations, a partition
claimed by two or three members of the newest one (contested), claims on partitions that do not exist
and on topics nobody subscribes to.  For every such group and any target, ``prepare`` numbers exactly
the claims ``owners_and_contested`` believes, and ``withhold`` makes the plan ``withhold_moving`` makes,
from the compiled core (``_withhold.c``) and from its Python fallback (``withhold_py``) alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rackplan.assignor.consumer.owned import owners_and_contested, withhold_moving
from rackplan.assignor.consumer.sticky.common import prepare
from rackplan.assignor.consumer.sticky.plan import withhold, withhold_py
from rackplan.assignor.model import Cluster, ConsumerGroup, ConsumerPlan, Member, TopicPartition
from rackplan.assignor.record import replace
from tests.strategies import clusters, consumer_groups

if TYPE_CHECKING:
    from rackplan.assignor.flow.compiled import Core

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def claimed_groups(draw: st.DrawFn) -> tuple[Cluster, ConsumerGroup]:
    """A group whose claims break the shared strategy's tidy shape (see the module docstring)."""
    cluster = draw(clusters(max_topics=4))
    group = draw(consumer_groups(cluster, "cooperative-sticky"))
    assume(group.members)
    every = [(t, p) for t, parts in sorted(cluster.topics.items()) for p in range(len(parts))]
    extra: list[TopicPartition] = [*every, ("t0", 99), ("gone", 0)]
    members = []
    for m in group.members:
        more = draw(st.lists(st.sampled_from(extra), max_size=4))
        generation = draw(st.sampled_from([m.generation, m.generation, 1, 2, -1]))
        members.append(replace(m, owned=(*m.owned, *more), generation=generation))
    return cluster, replace(group, members=tuple(members))


def _subscribed(prep_topics: list[str], cluster: Cluster) -> list[TopicPartition]:
    return [(t, p) for t in prep_topics for p in range(len(cluster.topics[t]))]


@SETTINGS
@given(claimed_groups())
def test_prepare_numbers_exactly_the_claims_the_shared_rules_believe(
    inst: tuple[Cluster, ConsumerGroup],
) -> None:
    cluster, group = inst
    prep = prepare(cluster, group)
    claims, contested = owners_and_contested(cluster, group)
    index = {mid: i for i, mid in enumerate(prep.member_ids)}
    parts = _subscribed(prep.topics, cluster)
    assert prep.claim_owner == [index[claims[tp]] if tp in claims else -1 for tp in parts]
    assert {parts[gp]: [prep.member_ids[i] for i in who] for gp, who in prep.contested.items()} == {
        tp: who for tp, who in contested.items() if tp[0] in prep.topics
    }
    topics_of = {m.member_id: set(m.topics) for m in group.members}
    assert prep.owner == [
        index[claims[tp]] if tp in claims and tp[0] in topics_of[claims[tp]] else -1 for tp in parts
    ]


@SETTINGS
@given(claimed_groups(), st.data())
def test_withhold_makes_the_plan_withhold_moving_makes(
    inst: tuple[Cluster, ConsumerGroup], data: st.DataObject
) -> None:
    cluster, group = inst
    prep = prepare(cluster, group)
    assume(prep.num_partitions)
    n = len(prep.member_ids)
    holder = data.draw(
        st.lists(st.integers(0, n - 1), min_size=prep.num_partitions, max_size=prep.num_partitions)
    )
    parts = _subscribed(prep.topics, cluster)
    assignment: dict[str, list[TopicPartition]] = {mid: [] for mid in prep.member_ids}
    for gp, h in enumerate(holder):
        assignment[prep.member_ids[h]].append(parts[gp])
    claims, contested = owners_and_contested(cluster, group)
    want = withhold_moving(assignment, claims, contested)
    got = withhold(prep, holder)
    assert got == want
    assert withhold_py(prep, holder) == want
    assert list(got.revoked) == sorted(got.revoked)
    assert [list(v) for v in got.assignment.values()] == [list(v) for v in want.assignment.values()]


@SETTINGS
@given(claimed_groups(), st.data())
def test_the_core_answers_every_target(
    core: Core, inst: tuple[Cluster, ConsumerGroup], data: st.DataObject
) -> None:
    """Every drawn target is the core's to answer (None would hand it to the Python silently)."""
    prep = prepare(*inst)
    n, size = len(prep.member_ids), prep.num_partitions
    holder = data.draw(st.lists(st.integers(0, n - 1), min_size=size, max_size=size))
    got = core.withhold(
        holder, prep.claim_owner, prep.contested, prep.member_ids, prep.topics, prep.topic_offset
    )
    assert got is not None
    assert withhold_py(prep, holder) == ConsumerPlan(assignment=got[0], revoked=got[1])


def test_what_the_core_cannot_take_it_hands_back(core: Core) -> None:
    """A holder out of range, offsets that do not number the partitions, a contested partition out of
    range: None, and nothing raised."""
    ids, topics = ["a", "b"], ["t"]
    assert core.withhold([0, 1], [-1, 0], {}, ids, topics, [0, 2]) == (
        {"a": [("t", 0)], "b": []},
        {"a": [("t", 1)]},
    )
    assert core.withhold([0, 2], [-1, 0], {}, ids, topics, [0, 2]) is None
    assert core.withhold([0, 1], [-1, 0], {}, ids, topics, [0, 3]) is None
    assert core.withhold([0, 1], [-1, 0], {5: [0, 1]}, ids, topics, [0, 2]) is None


def test_a_contested_partition_is_withheld_from_every_claimer_and_listed_under_each() -> None:
    cluster = Cluster(broker_racks={1: "a"}, topics={"t": ((1,), (1,))})
    members = (
        Member("m1", "a", ("t",), (("t", 0), ("t", 1)), 3),
        Member("m2", "a", ("t",), (("t", 0),), 3),
        Member("m3", None, ("t",), (("t", 1),), 2),  # an older generation: not believed
    )
    prep = prepare(cluster, ConsumerGroup("g", "cooperative-sticky", members))
    assert prep.contested == {0: [0, 1]} and prep.claim_owner == [-1, 0]
    plan = withhold(prep, [1, 2])
    assert plan.assignment == {"m1": [], "m2": [], "m3": []}
    assert plan.revoked == {"m1": [("t", 0), ("t", 1)], "m2": [("t", 0)]}
