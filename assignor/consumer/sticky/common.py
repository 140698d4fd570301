"""The cooperative-sticky assignor's working model: members, partitions and racks as integers.

Both paths of :mod:`rackplan.assignor.consumer.sticky` run their hot loops on plain
lists indexed by member number (members sorted by id) and by *global partition
number* (subscribed topics sorted by name, then partition number), so that
ties broken by the lowest index are the deterministic "sorted member id /
sorted partition" tie-breaks the contract asks for.

Members are grouped into *rack classes*: members that are cross-rack for
exactly the same partitions.  A class is ``(has_rack, rack_bit)``: no rack
(never cross-rack), a rack holding no broker (bit 0: cross-rack for every
partition with a known rack) or one broker rack.  Cost only ever depends on a
member's class and a partition's replica-rack mask.
"""

from __future__ import annotations

from ...model import Cluster, ConsumerGroup, Member, TopicPartition
from ...record import field, record


@record()
class Prepared:
    """Integer view of one rebalance (see the module docstring)."""

    member_ids: list[str]
    member_class: list[int]
    #: per class: (has_rack, rack_bit)
    classes: list[tuple[bool, int]]
    topics: list[str]
    topic_offset: list[int]  # global number of partition 0 of each topic; one extra entry at the end
    part_topic: list[int]
    part_mask: list[int]
    member_topics: list[list[int]]  # sorted topic numbers each member subscribes to
    topic_members: list[list[int]]  # sorted member numbers subscribed to each topic
    #: valid previous owner (see :mod:`rackplan.assignor.consumer.owned`) still subscribed to the topic, else -1
    owner: list[int]
    #: the member of each valid claim on a subscribed topic's partition, subscribed or not, else -1: what
    #: cooperative withholding must respect (claims on topics nobody subscribes to are never assigned)
    claim_owner: list[int]
    #: partitions claimed by several members of the newest generation, with those members in the order
    #: they claimed it (:func:`rackplan.assignor.consumer.owned.contested_partitions`, numbered)
    contested: dict[int, list[int]] = field(default_factory=dict)
    #: a holder (member per partition) whose cross-rack count is proven the fewest any balanced
    #: assignment with the same member counts can have (by an earlier run's flow; see settle)
    min_cross_holder: list[int] | None = None
    #: *keep-first* run of the general path: a partition held by its valid owner never moves, except
    #: where balancing cannot do without it (see ``rackplan.assignor.consumer.sticky.general``)
    keep_owned: bool = False
    #: the general path's price of one cross-rack partition, in moves; 0: above any number of moves
    #: (the default objective).  A *priced* run trades locality for moves (settle_general's candidates).
    cross_price: int = 0
    #: a complete balanced holder the general path starts from instead of keeping the owners and
    #: dealing the rest (settle_general's *fresh-start* candidate); owners still price the moves
    start: list[int] | None = None

    @property
    def num_partitions(self) -> int:
        return len(self.part_mask)

    def cross(self, cls: int, mask: int) -> int:
        """1 when a member of class ``cls`` reading a partition with replica mask ``mask`` is cross-rack."""
        has_rack, bit = self.classes[cls]
        return 1 if has_rack and mask and not (mask & bit) else 0

    def matches(self, cls: int, mask: int) -> bool:
        """Kafka's rack match (not ``racksMismatch``): a member without a rack, or a replica in its rack.

        Stricter than "not cross-rack": a partition with no known replica rack
        matches no racked member, so Kafka does not insist on keeping it there.
        """
        has_rack, bit = self.classes[cls]
        return not has_rack or bool(mask & bit)

    def member_bits(self) -> list[int]:
        """Per member, the replica-mask bits that make a partition local to it: its rack's bit, or every
        bit (-1) for a member without a rack.  A partition of mask ``k`` is cross-rack for member ``m``
        exactly when ``k and not k & bits[m]`` (:meth:`cross`, without a call per partition)."""
        bits = [bit if has_rack else -1 for has_rack, bit in self.classes]
        return [bits[g] for g in self.member_class]

    def topic_local_bits(self) -> list[int]:
        """Per topic, the replica-mask bits some subscriber is local to (-1 when one has no rack): a
        partition of mask ``k`` is cross-rack whoever of its topic's subscribers holds it exactly when
        ``k and not k & bits[t]`` (the same test as :meth:`member_bits`, over the topic's subscribers)."""
        member = self.member_bits()
        out = [0] * len(self.topics)
        for t, subs in enumerate(self.topic_members):
            for m in subs:
                out[t] |= member[m]
        return out

    def partition(self, gp: int) -> TopicPartition:
        t = self.part_topic[gp]
        return (self.topics[t], gp - self.topic_offset[t])


def prepare(cluster: Cluster, group: ConsumerGroup) -> Prepared:
    """Number members and partitions, classify racks, and resolve previous owners."""
    members = sorted(group.members, key=lambda m: m.member_id)
    member_ids = [m.member_id for m in members]
    topics = sorted({t for m in members for t in m.topics})
    topic_index = {t: i for i, t in enumerate(topics)}

    class_index: dict[tuple[bool, int], int] = {}
    keys = []
    for m in members:
        keys.append((m.rack is not None, cluster.member_bit(m.rack)))
    for key in sorted(set(keys)):
        class_index[key] = len(class_index)
    member_class = [class_index[k] for k in keys]

    topic_offset = [0]
    part_topic: list[int] = []
    part_mask: list[int] = []
    for ti, t in enumerate(topics):
        masks = cluster.masks[t]
        part_topic.extend([ti] * len(masks))
        part_mask.extend(masks)
        topic_offset.append(len(part_mask))

    member_topics = [sorted(topic_index[t] for t in m.topics) for m in members]
    topic_members: list[list[int]] = [[] for _ in topics]
    for i, ts in enumerate(member_topics):
        for tn in ts:
            topic_members[tn].append(i)

    claim_owner, contested = _claims(members, group, topic_index, topic_offset)
    if len({len(ts) for ts in member_topics}) == 1 and len(member_topics[0]) == len(topics):
        owner = list(claim_owner)  # equal subscriptions: every claim on a subscribed topic is its claimer's
    else:
        subscribed = [set(ts) for ts in member_topics]
        owner = [-1] * len(part_mask)
        for tk in range(len(topics)):
            for gp in range(topic_offset[tk], topic_offset[tk + 1]):
                mk = claim_owner[gp]
                if mk >= 0 and tk in subscribed[mk]:
                    owner[gp] = mk
    return Prepared(
        member_ids=member_ids,
        member_class=member_class,
        classes=sorted(class_index, key=class_index.__getitem__),
        topics=topics,
        topic_offset=topic_offset,
        part_topic=part_topic,
        part_mask=part_mask,
        member_topics=member_topics,
        topic_members=topic_members,
        owner=owner,
        claim_owner=claim_owner,
        contested=contested,
    )


def _claims(
    members: list[Member], group: ConsumerGroup, topic_index: dict[str, int], topic_offset: list[int]
) -> tuple[list[int], dict[int, list[int]]]:
    """The claimer of each subscribed partition (-1: none, or contested), and the contested ones.

    :func:`rackplan.assignor.consumer.owned.owners_and_contested`'s rules (the newest generation only,
    a partition claimed by two of its members has no owner, claims on partitions that do not exist are
    ignored) read straight into member and partition numbers: a claim on a topic no member subscribes
    to is never assigned, so it can be neither kept nor withheld.  Claimers of a contested partition
    are listed in input order, as Kafka's protocol reports them.
    """
    claim_owner = [-1] * topic_offset[-1]
    contested: dict[int, list[int]] = {}
    if not members:
        return claim_owner, contested
    index = {m.member_id: i for i, m in enumerate(members)}
    top = max(m.generation for m in members)
    get = topic_index.get
    for m in group.members:
        if m.generation != top:
            continue
        mk = index[m.member_id]
        for topic, p in m.owned:
            tk = get(topic)
            if tk is None or not 0 <= p < topic_offset[tk + 1] - topic_offset[tk]:
                continue
            gp = topic_offset[tk] + p
            prev = claim_owner[gp]
            if prev == -1:
                claim_owner[gp] = mk
            elif prev != mk:
                who = contested.setdefault(gp, [prev])
                if mk not in who:
                    who.append(mk)
    for gp in contested:
        claim_owner[gp] = -1
    return claim_owner, contested


def cross_count(prep: Prepared, holder: list[int]) -> int:
    """Cross-rack partitions of a complete ``holder`` (the contract's notion, see :meth:`Prepared.cross`).

    Every settling step and candidate asks it, on every partition: one pass over plain ints."""
    bits = prep.member_bits()
    return sum(1 for h, k in zip(holder, prep.part_mask, strict=True) if k and not k & bits[h])


def deal(parts: list[int], slots: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Deal ``parts`` round robin to ``(member, free slots)`` in the given order, as Kafka deals.

    Returns ``(member, partition)`` pairs; one partition per member per round,
    so consecutive partitions (a topic's) spread over members.  The slots must
    add up to the number of partitions.
    """
    out: list[tuple[int, int]] = []
    active = [[m, s] for m, s in slots if s > 0]
    pos, n = 0, len(parts)
    while pos < n and active:
        still = []
        for entry in active:
            if pos >= n:
                break
            out.append((entry[0], parts[pos]))
            pos += 1
            entry[1] -= 1
            if entry[1]:
                still.append(entry)
        active = still
    if pos != n:
        raise AssertionError("free slots and partitions to place differ")
    return out
