"""The contract-level helpers (rackplan.assignor.contract) against the code they replaced and the model.

Each helper is checked against an independent statement of the same rule:
task partitions against the Streams task model's cross-rack counts, the
topics of a document against the parsed model's, documents against parsing,
a restricted or extended cluster against one built from scratch, and the
cooperative follow-up loop against the sticky assignor's own promise (one
follow-up settles it).
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rackplan.assignor.consumer import run_assignor
from rackplan.assignor.contract import (
    app_topics,
    follow_up,
    group_topics,
    instance_document,
    is_cross_rack,
    leader_cross_rack,
    settle_cooperative,
    subtopologies_of,
    task_partitions,
    topics_of,
)
from rackplan.assignor.model import Cluster, ConsumerGroup, StreamsApp
from rackplan.assignor.parse import parse_instance
from rackplan.assignor.streams.tasks import build_model
from rackplan.assignor.surface import exports
from tests.strategies import clusters, consumer_groups
from tests.streams_strategies import streams_instances

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def groups(draw: st.DrawFn) -> tuple[Cluster, ConsumerGroup]:
    cluster = draw(clusters())
    return cluster, draw(consumer_groups(cluster, draw(st.sampled_from(["range", "cooperative-sticky"]))))


@SETTINGS
@given(streams_instances())
def test_task_partitions_are_the_task_models_partitions(inst: tuple[Cluster, StreamsApp]) -> None:
    """Cross-rack partitions of every task, counted through task_partitions, equal the task model's counts."""
    cluster, app = inst
    model = build_model(cluster, app)
    subs = subtopologies_of(app)
    assert subtopologies_of(instance_document(cluster, app)["streams_app"]) == subs
    for t, name in enumerate(model.tasks):
        for c, client in enumerate(model.clients):
            bit = cluster.member_bit(client.rack)
            for standby, counts in ((False, model.active_cross), (True, model.standby_cross)):
                parts = task_partitions(subs, cluster.topics, name, standby)
                cross = sum(is_cross_rack(client.rack, bit, cluster.masks[tp][p]) for tp, p in parts)
                assert cross == counts[t][model.group_of[c]], (name, client.process_id, standby)


def test_task_partitions_of_unknown_or_malformed_tasks_are_empty() -> None:
    cluster = Cluster({1: "a"}, {"in": ((1,), (1,)), "log": ((1,),)})
    app = {"subtopologies": [{"id": "0", "source_topics": ["in"], "changelog_topics": ["log", "gone"]}]}
    subs = subtopologies_of(app)
    assert task_partitions(subs, cluster.topics, "0_0") == [("in", 0), ("log", 0)]
    assert task_partitions(subs, cluster.topics, "0_1") == [("in", 1)]  # the changelog has one partition
    assert task_partitions(subs, cluster.topics, "0_0", standby=True) == [("log", 0)]
    for bad in ("1_0", "0_x", "0_²", "0_", "0", "0_" + "9" * 5000):
        assert task_partitions(subs, cluster.topics, bad) == []


@SETTINGS
@given(groups())
def test_documents_parse_back_to_the_model(inst: tuple[Cluster, ConsumerGroup]) -> None:
    cluster, group = inst
    doc = instance_document(cluster, group)
    assert parse_instance(doc) == (cluster, group)
    assert group_topics(doc["consumer_group"]) == topics_of(group)


@SETTINGS
@given(streams_instances())
def test_streams_documents_parse_back_to_the_model(inst: tuple[Cluster, StreamsApp]) -> None:
    cluster, app = inst
    doc = instance_document(cluster, app)
    assert parse_instance(doc) == (cluster, app)
    assert app_topics(doc["streams_app"]) == topics_of(app)
    assert all(t in app_topics(doc["streams_app"]) for s in app.subtopologies for t in s.changelog_topics)


@SETTINGS
@given(clusters(), st.data())
def test_restricted_and_extended_clusters_equal_clusters_built_from_scratch(
    cluster: Cluster, data: st.DataObject
) -> None:
    names = sorted(cluster.topics)
    some = data.draw(st.lists(st.sampled_from([*names, "absent"]), unique=True)) if names else ["absent"]
    want = Cluster(cluster.broker_racks, {t: cluster.topics[t] for t in sorted(set(some) & set(names))})
    got = cluster.restrict(some)
    assert (got.topics, got.masks, got.racks, got.rack_bit) == (
        want.topics,
        want.masks,
        want.racks,
        want.rack_bit,
    )
    assert list(got.topics) == list(want.topics)
    empty = Cluster(cluster.broker_racks, {})
    grown = empty.extend({t: cluster.topics[t] for t in some if t in cluster.topics}).restrict(names)
    assert (grown.topics, grown.masks) == (cluster.restrict(some).topics, cluster.restrict(some).masks)


def test_leader_judgement() -> None:
    assert leader_cross_rack("a", "b")
    assert not leader_cross_rack("a", "a")
    assert not leader_cross_rack(None, "b")  # a member without rack is local to everything
    assert not leader_cross_rack("a", None)  # no leader, or a rack-less one: unknown, not counted


@SETTINGS
@given(groups())
def test_cooperative_follow_ups_settle_in_one_round(inst: tuple[Cluster, ConsumerGroup]) -> None:
    """Round one with owners, then follow-ups: settled after at most one, and a settled plan is left alone."""
    cluster, group = inst
    group = ConsumerGroup(group.group_id, "cooperative-sticky", group.members)
    plan, ms = run_assignor(cluster, group)
    calls: list[ConsumerGroup] = []

    def run(g: ConsumerGroup) -> tuple:  # type: ignore[type-arg]
        calls.append(g)
        return run_assignor(cluster, g)

    end = settle_cooperative(group, plan, ms, run, 3, lambda g: 7)
    assert end.settled and end.follow_ups <= 1 and len(calls) == end.follow_ups
    if end.follow_ups:
        assert calls[0] == follow_up(group, plan.assignment, 7)
        assert all(m.generation == 7 for m in end.group.members)
    again = settle_cooperative(end.group, end.plan, end.elapsed_ms, run, 3, lambda g: 8)
    assert again.follow_ups == 0 and again.plan == end.plan
    stopped = settle_cooperative(group, plan, ms, run, 0, lambda g: 1)
    assert (
        stopped.plan == plan
        and stopped.follow_ups == 0
        and stopped.settled == (not any(plan.revoked.values()))
    )


def test_the_public_api_resolves_lazily() -> None:
    """Every name of ``__all__`` is importable from the package and is its module's object; nothing else is."""
    api = importlib.import_module("rackplan.assignor")  # its __all__ and __getattr__ exist at run time only

    with open(api.__file__ or "", encoding="utf-8") as f:
        table = exports(f.read())
    assert api.__all__ == sorted(table)
    for name, (level, module, attr) in table.items():
        assert level == 1
        defining = importlib.import_module(f"rackplan.assignor.{module}")
        assert getattr(api, name) is getattr(defining, attr)
    with pytest.raises(AttributeError, match="no attribute 'Edge'"):
        _ = api.Edge


def test_importing_the_package_imports_no_assignor() -> None:
    """``import rackplan.assignor`` loads no submodule but its surface: ``rackplan assign`` pays only for the path it takes."""
    code = "import sys, rackplan.assignor; print(sorted(m for m in sys.modules if m.startswith('rackplan.assignor.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['rackplan.assignor.surface']"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "é", "a-1"]), min_size=1, max_size=12))
def test_a_members_topics_parse_sorted_without_repeats(topics: list[str]) -> None:
    """The parser's sorted fast path (``parse._known_topics``) gives what the contract's set semantics say:
    the distinct names, sorted, whatever order and repeats the document has."""
    doc = {
        "cluster": {
            "brokers": [{"id": 1, "rack": "r"}],
            "topics": {t: [[1]] for t in ("a", "b", "c", "é", "a-1")},
        },
        "consumer_group": {"group_id": "g", "members": [{"member_id": "m", "topics": topics}]},
    }
    _, group = parse_instance(doc)
    assert isinstance(group, ConsumerGroup)
    assert group.members[0].topics == tuple(sorted(set(topics)))


_ODD_VALUES: st.SearchStrategy[object] = st.sampled_from(
    [None, "", "é", "\ud800", 7, -1, 2**31, True, 1.5, [], {}, "a", "r"]
)


@st.composite
def _member_objects(draw: st.DrawFn) -> dict[str, object]:
    """A valid member object (optional fields absent or not), then most often one field made odd."""
    valid: dict[str, st.SearchStrategy[object]] = {
        "member_id": st.sampled_from(["m", "m-2"]),
        "topics": st.lists(st.sampled_from(["a", "b"]), max_size=4),
        "rack": st.sampled_from(["r", "", None]),
        "generation": st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
        "owned": st.one_of(
            st.none(),
            st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3)).map(list), max_size=3),
        ),
    }
    member = {k: draw(v) for k, v in valid.items() if k in ("member_id", "topics") or draw(st.booleans())}
    if draw(st.booleans()):
        field = draw(st.sampled_from([*valid, "group_instance_id"]))
        odd = draw(
            st.one_of(
                _ODD_VALUES,
                st.sampled_from([2**31, -(2**31) - 1]),  # just outside a Java int
                st.integers(-(2**31) - 1, 2**31),
                st.lists(
                    st.one_of(st.sampled_from(["a", "zz"]), _ODD_VALUES, st.just(["a", -1])), max_size=3
                ),
            )
        )
        member[field] = odd
    return member


@settings(max_examples=300, deadline=None)
@given(_member_objects())
def test_the_plain_member_path_reads_what_the_careful_path_reads(member: dict[str, object]) -> None:
    """``parse._plain_member`` (no path strings) answers None or exactly the member ``parse._member``
    reads from the same object: the fast path never accepts what the careful one refuses, nor reads it
    otherwise."""
    from rackplan.assignor.fields import InputError
    from rackplan.assignor.parse import _member, _plain_member

    cluster = Cluster({1: "r"}, {"a": ((1,),), "b": ((1,),)})
    plain = _plain_member(member, cluster)
    event("plain path" if plain is not None else "careful path only")
    if plain is None:
        return
    try:
        careful = _member(member, 0, cluster, set(), {})
    except InputError as e:
        raise AssertionError(f"the plain path read {plain} where the careful one refused: {e}") from e
    assert plain == careful
