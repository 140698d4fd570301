"""Contract input (decoded JSON) to the validated model, or an :class:`InputError`.

Every rejection names the offending field with a JSON-path-like location
(``consumer_group.members[2].topics[0]``) so an operator can fix the document
without reading a traceback.  Unknown fields are ignored, as the contract says.

A message is always one line that cannot be mistaken for another message:
object keys taken from the document (topic names, tag keys, task-lag keys)
appear in paths as ``["..."]`` with JSON escapes unless they are plain
identifiers, values are quoted with ``repr``, and :func:`~.fields.one_line` escapes
whatever non-printable character is left (newlines, U+2028, lone surrogates).

Edge cases, decided once here so every assignor sees the same model (issue 16):

* every string that reaches the output must be encodable UTF-8, so lone
  surrogates (JSON ``"\\ud800"``) are rejected where they could be echoed;
* broker ids are Kafka's int32; Streams rack-aware costs are Kafka's
  ``rack.aware.assignment.traffic_cost`` / ``non_overlap_cost``, int32 too;
* an empty member or client ``rack`` is no rack, as Kafka's consumer treats an
  empty ``client.rack``; an empty *broker* rack stays a rack named ``""``
  (Kafka's ``Node.hasRack`` is ``rack != null``), which no client can be in;
* ``group_instance_id`` must be non-empty and unique within the group, as
  Kafka's broker requires.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import chain

from .fields import (
    INT32_MAX,
    INT32_MIN,
    HugeInt,
    InputError,
    finite_sum,
    key_path,
    read_choice,
    read_int,
    read_key,
    read_list,
    read_obj,
    read_opt_str,
    read_rack,
    read_required,
    read_str,
    short_int,
    type_name,
)
from .model import (
    BALANCES,
    CONSUMER_ASSIGNORS,
    DEFAULT_CONSUMER_ASSIGNOR,
    NO_GENERATION,
    OBJECTIVES,
    Cluster,
    ConsumerGroup,
    Member,
    StreamsApp,
    TopicPartition,
)
from .parse_streams import parse_streams_app as parse_streams_app

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (issue 29)

if TYPE_CHECKING:
    from typing import Any


def parse_cluster(doc: object, no_bools_or_floats: bool = False) -> Cluster:
    """The ``cluster`` object; ``no_bools_or_floats`` when the caller knows the document has neither.

    JSON ``true`` and ``1.0`` compare (and hash) equal to ``1``, so a replica
    list can only be checked by its distinct values when the document holds
    no boolean or float at all (:func:`rackplan.assignor.cli.decode` knows).  Then each
    topic costs two C-level passes (lists to tuples, tuples to a set of a few
    distinct lists), else one more over every replica's type.
    """
    c = read_obj(doc, "cluster")
    brokers: dict[int, str | None] = {}
    for i, b in enumerate(read_list(read_required(c, "brokers", "cluster"), "cluster.brokers")):
        path = f"cluster.brokers[{i}]"
        b = read_obj(b, path)
        bid = read_int(read_required(b, "id", path), f"{path}.id", minimum=INT32_MIN, maximum=INT32_MAX)
        if bid in brokers:
            raise InputError(f"{path}.id", f"duplicate broker id {bid}")
        brokers[bid] = read_opt_str(b.get("rack"), f"{path}.rack")
    topics: dict[str, tuple[tuple[int, ...], ...]] = {}
    for name, parts in read_obj(read_required(c, "topics", "cluster"), "cluster.topics").items():
        lists = _replica_tuples(parts, brokers, no_bools_or_floats)
        if lists is None:
            lists = _replica_lists(name, parts, brokers)  # names the first bad field
        elif not name.isascii():
            read_key(name, key_path("cluster.topics", name))
        topics[name] = lists
    traffic = None if c.get("traffic") is None else _traffic(c["traffic"], topics)
    return Cluster(broker_racks=brokers, topics=topics, traffic=traffic)


def _bytes_per_s(v: object, path: str) -> float:
    """One bytes/s figure: a finite JSON number >= 0 (integers too large for a float are not finite)."""
    if isinstance(v, HugeInt):
        raise InputError(path, "must be a finite number of bytes/s")
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise InputError(path, f"expected a number of bytes/s, got {type_name(v)}")
    try:
        x = float(v)
    except OverflowError:
        x = math.inf
    if not math.isfinite(x):
        raise InputError(path, "must be a finite number of bytes/s")
    if x < 0:
        raise InputError(path, f"must be at least 0 bytes/s, got {x!r}")
    return x


def _traffic(doc: object, topics: Mapping[str, tuple[tuple[int, ...], ...]]) -> dict[str, tuple[float, ...]]:
    """``cluster.traffic``: per topic a list of bytes/s (one per partition) or its total, spread evenly.

    A topic the cluster does not list has no partitions to carry traffic: its
    entry is checked like any other (finite, >= 0) and then ignored, so a
    traffic map measured over a wider cluster can be passed as it is.
    """
    out: dict[str, tuple[float, ...]] = {}
    for name, v in read_obj(doc, "cluster.traffic").items():
        path = key_path("cluster.traffic", name)
        read_key(name, path)
        n = len(topics[name]) if name in topics else None
        if isinstance(v, list):
            values = tuple(_bytes_per_s(x, f"{path}[{p}]") for p, x in enumerate(v))
            if n is not None and len(values) != n:
                raise InputError(path, f"has {len(values)} values but the topic has {n} partitions")
        else:
            total = _bytes_per_s(v, path)
            values = (total / n,) * n if n else ()
        if n is not None:
            out[name] = values
    finite_sum((x for row in out.values() for x in row), "cluster.traffic", "the cluster's partitions")
    return out


def _replica_tuples(
    parts: object, brokers: Mapping[int, str | None], no_bools_or_floats: bool
) -> tuple[tuple[int, ...], ...] | None:
    """A topic's replica lists as tuples when all are valid, by C-level passes; None otherwise."""
    if type(parts) is not list or not set(map(type, parts)) <= {list}:
        return None
    lists = tuple(map(tuple, parts))
    if no_bools_or_floats:
        try:
            values = set(chain.from_iterable(set(lists)))
        except TypeError:  # an unhashable value (array or object) in a replica list
            return None
    else:
        if not set(map(type, chain.from_iterable(lists))) <= {int}:
            return None
        values = set(chain.from_iterable(lists))
    if not all(type(v) is int for v in values) or not brokers.keys() >= values:
        return None
    return lists


def _replica_lists(
    name: str, parts: object, brokers: Mapping[int, str | None]
) -> tuple[tuple[int, ...], ...]:
    """One topic's replica lists, validated element by element to name the first bad field."""
    tpath = key_path("cluster.topics", name)
    read_key(name, tpath)
    replica_lists = []
    for p, replicas in enumerate(read_list(parts, tpath)):
        rpath = f"{tpath}[{p}]"
        ids = []
        for k, r in enumerate(read_list(replicas, rpath)):
            r = read_int(r, f"{rpath}[{k}]")
            if r not in brokers:
                raise InputError(f"{rpath}[{k}]", f"unknown broker id {short_int(r)}")
            ids.append(r)
        replica_lists.append(tuple(ids))
    return tuple(replica_lists)


def _topic_partition(v: object, path: str) -> TopicPartition:
    pair = read_list(v, path)
    if len(pair) != 2:
        raise InputError(path, "expected [topic, partition]")
    return read_str(pair[0], f"{path}[0]"), read_int(pair[1], f"{path}[1]", minimum=0)


def parse_consumer_group(doc: object, cluster: Cluster) -> ConsumerGroup:
    g = read_obj(doc, "consumer_group")
    group_id = read_str(read_required(g, "group_id", "consumer_group"), "consumer_group.group_id")
    assignor = read_choice(
        g.get("assignor"), "consumer_group.assignor", CONSUMER_ASSIGNORS, DEFAULT_CONSUMER_ASSIGNOR
    )
    members: list[Member] = []
    seen: set[str] = set()
    instances: dict[str, int] = {}
    raw = read_list(read_required(g, "members", "consumer_group"), "consumer_group.members")
    for i, m in enumerate(raw):
        member = _plain_member(m, cluster)
        if member is None:
            member = _member(m, i, cluster, seen, instances)
        elif member.member_id in seen:
            raise InputError(
                f"consumer_group.members[{i}].member_id", f"duplicate member id {member.member_id!r}"
            )
        seen.add(member.member_id)
        members.append(member)
    group = ConsumerGroup(group_id, assignor, tuple(members), *_traffic_options(g, assignor))
    return _finite_loads(cluster, group)


def _plain_member(m: object, cluster: Cluster) -> Member | None:
    """The member of the common valid shape, read without building a path per field; None for anything
    else (a static member, a non-ASCII string, a value :func:`_member` must check or name).

    Every field passes exactly what :func:`_member` accepts, so both give the same member: per member
    that path costs seven path strings and a dozen calls, a third of the parse of 2,100 one-topic members
    (issue 29).  Duplicate member ids are the caller's.
    """
    if type(m) is not dict or m.get("group_instance_id") is not None:
        return None
    mid, topics, rack, generation = m.get("member_id"), m.get("topics"), m.get("rack"), m.get("generation")
    if type(mid) is not str or not mid.isascii() or type(topics) is not list:
        return None
    if rack is not None and (type(rack) is not str or not rack.isascii()):
        return None
    if generation is None:
        generation = NO_GENERATION
    elif type(generation) is not int or not INT32_MIN <= generation <= INT32_MAX:
        return None
    subscription = _known_topics(topics, cluster)
    owned = _plain_owned(m.get("owned"))
    if subscription is None or owned is None:
        return None
    return Member(mid, rack or None, subscription, owned, generation)


def _member(m: object, i: int, cluster: Cluster, seen: set[str], instances: dict[str, int]) -> Member:
    """Member ``i``, each field checked on its own and the first bad one named (``instances``: the static
    members' ids so far, this one added)."""
    path = f"consumer_group.members[{i}]"
    m = read_obj(m, path)
    mid = read_str(read_required(m, "member_id", path), f"{path}.member_id")
    if mid in seen:
        raise InputError(f"{path}.member_id", f"duplicate member id {mid!r}")
    topics: list[str] = read_list(read_required(m, "topics", path), f"{path}.topics")
    subscription = _known_topics(topics, cluster)
    if subscription is None:
        for k, t in enumerate(topics):
            t = read_str(t, f"{path}.topics[{k}]")
            if t not in cluster.topics:
                raise InputError(f"{path}.topics[{k}]", f"unknown topic {t!r}")
        subscription = tuple(sorted(set(topics)))
    generation = m.get("generation")
    instance = read_opt_str(m.get("group_instance_id"), f"{path}.group_instance_id")
    if instance is not None:
        # Kafka's broker rejects an empty group.instance.id and never lets two
        # members share one (the second fences the first).
        if not instance:
            raise InputError(f"{path}.group_instance_id", "must not be empty")
        if instance in instances:
            raise InputError(
                f"{path}.group_instance_id",
                f"duplicate group_instance_id {instance!r} (also members[{instances[instance]}])",
            )
        instances[instance] = i
    return Member(
        member_id=mid,
        rack=read_rack(m.get("rack"), f"{path}.rack"),
        topics=subscription,
        owned=_owned(m.get("owned"), f"{path}.owned"),
        generation=NO_GENERATION
        if generation is None
        else read_int(generation, f"{path}.generation", minimum=INT32_MIN, maximum=INT32_MAX),
        group_instance_id=instance,
    )


def _known_topics(topics: list[Any], cluster: Cluster) -> tuple[str, ...] | None:
    """A member's ``topics`` sorted and without repeats, when each names a cluster topic; else None
    (the caller then names the first bad entry).

    Names of the cluster's topics were checked there, and only a string equals one (JSON has no other
    value equal to a string), so a sort, one lookup per entry and a set's size suffice: no type pass,
    and the set is built of a sorted list (about half the per-member cost: issue 29, 2,000 members of
    50 topics each).
    """
    try:
        ordered = sorted(topics)
        if not all(map(cluster.topics.__contains__, ordered)):
            return None
    except TypeError:  # values that do not compare, or an unhashable one (array, object)
        return None
    return tuple(ordered) if len(set(ordered)) == len(ordered) else tuple(sorted(set(ordered)))


def _finite_loads(cluster: Cluster, group: ConsumerGroup) -> ConsumerGroup:
    """``group``, once the load rule's weights, as it weighs them, are known to sum to a float.

    First bytes/s, a partition of unknown traffic at the mean of the known (which can take the sum
    past a float when the known ones alone do not), so the default floor (1% of their mean) is taken
    of a finite sum; then w(p) = bytes/s + ``balance_floor``.
    """
    if group.balance == "bytes":
        from .traffic import group_weights, load_weights  # lazily: else never imported (issue 29)

        weights = group_weights(cluster, (t for m in group.members for t in m.topics))
        what = "the group's partitions' bytes/s (unknown traffic weighing the mean of the known)"
        finite_sum((x for row in weights.values() for x in row), "cluster.traffic", what)
        weights = load_weights(cluster, group)
        finite_sum(
            (x for row in weights.values() for x in row),
            "cluster.traffic" if group.balance_floor is None else "consumer_group.balance_floor",
            "the group's partitions' weights (bytes/s + balance_floor)",
        )
    return group


def _traffic_options(g: Mapping[str, Any], assignor: str) -> tuple[str, str, float | None]:
    """``objective``, ``balance`` and ``balance_floor``; non-default choices need ``rack-optimal``."""
    objective = read_choice(g.get("objective"), "consumer_group.objective", OBJECTIVES, "partitions")
    balance = read_choice(g.get("balance"), "consumer_group.balance", BALANCES, "count")
    for key, value, default in (("objective", objective, "partitions"), ("balance", balance, "count")):
        if value != default and assignor != "rack-optimal":
            raise InputError(
                f"consumer_group.{key}", f"{value!r} needs assignor 'rack-optimal', not {assignor!r}"
            )
    floor = g.get("balance_floor")
    return (
        objective,
        balance,
        None if floor is None else _bytes_per_s(floor, "consumer_group.balance_floor"),
    )


def _owned(v: object, path: str) -> tuple[TopicPartition, ...]:
    """A member's ``owned`` list; a fast check of the common shape, element by element otherwise."""
    plain = _plain_owned(v)
    if plain is not None:
        return plain
    pairs = read_list(v, path)
    return tuple(_topic_partition(tp, f"{path}[{k}]") for k, tp in enumerate(pairs))


def _plain_owned(v: object) -> tuple[TopicPartition, ...] | None:
    """``owned`` when absent or of the common shape (pairs of an ASCII name and an int >= 0), else None."""
    if v is None:
        return ()
    if type(v) is not list:
        return None
    try:
        out = [(t, p) for t, p in v]
    except (TypeError, ValueError):
        return None
    if all(type(t) is str and t.isascii() and type(p) is int and p >= 0 for t, p in out):
        return tuple(out)
    return None


def parse_instance(
    doc: object, no_bools_or_floats: bool = False
) -> tuple[Cluster, ConsumerGroup | StreamsApp]:
    """Validate a whole contract input document (see :func:`parse_cluster` for the flag)."""
    root = read_obj(doc, "(document)")
    cluster = parse_cluster(read_required(root, "cluster", ""), no_bools_or_floats)
    has_group, has_app = "consumer_group" in root, "streams_app" in root
    if has_group == has_app:
        raise InputError(
            "consumer_group" if not has_group else "streams_app",
            "exactly one of consumer_group or streams_app must be present",
        )
    if has_group:
        return cluster, parse_consumer_group(root["consumer_group"], cluster)
    return cluster, parse_streams_app(root["streams_app"], cluster)
