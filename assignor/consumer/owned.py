"""Who owned what before this rebalance, and what a cooperative round must withhold.

Shared by every sticky-aware assignor so that they agree on the rules of the
consumer protocol:

* Only members of the group's highest generation are believed: a member that
  reports an older generation missed a rebalance, so its claims are stale
  (Kafka's ``AbstractStickyAssignor`` drops them the same way).  Members that
  report no generation count as ``NO_GENERATION``; when nobody reports one,
  every claim is believed.
* A partition claimed by two members of that generation has no owner: neither
  claim can be trusted, and both may be consuming it, so a cooperative round
  withholds it until both have revoked it.
* A claim on a partition that no longer exists is ignored.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping

from ..model import Cluster, ConsumerGroup, ConsumerPlan, TopicPartition


def _top_generation_claims(
    cluster: Cluster, group: ConsumerGroup
) -> tuple[dict[TopicPartition, str], dict[TopicPartition, list[str]]]:
    """Claims of the newest generation on existing partitions: first claimer of each, and the contested.

    The second map holds the partitions claimed by several members, with all
    claimers in input order.  One ``setdefault`` per claim: this runs for every
    plan's statistics too, on up to millions of claims.
    """
    if not group.members:
        return {}, {}
    top = max(m.generation for m in group.members)
    first: dict[TopicPartition, str] = {}
    shared: dict[TopicPartition, list[str]] = {}
    for m in group.members:
        if m.generation != top:
            continue
        mid = m.member_id
        setdefault = first.setdefault
        for tp in m.owned:
            prev = setdefault(tp, mid)
            if prev != mid:
                who = shared.setdefault(tp, [prev])
                if mid not in who:
                    who.append(mid)
    sizes = {t: len(parts) for t, parts in cluster.topics.items()}
    valid = {tp: mid for tp, mid in first.items() if tp[1] < sizes.get(tp[0], 0)}
    return valid, {tp: who for tp, who in shared.items() if tp in valid}


def previous_owners(cluster: Cluster, group: ConsumerGroup) -> dict[TopicPartition, str]:
    """Map each partition to the member that validly owned it, per the module rules.

    Claims are kept whether or not the member still subscribes to the topic:
    the member holds the partition until it revokes it, which matters for
    cooperative withholding.  Stickiness must check the subscription itself.
    """
    return owners_and_contested(cluster, group)[0]


def owners_and_contested(
    cluster: Cluster, group: ConsumerGroup
) -> tuple[dict[TopicPartition, str], dict[TopicPartition, list[str]]]:
    """:func:`previous_owners` and :func:`contested_partitions` from one pass over the claims.

    A cooperative assignor needs both; each alone re-reads every claim (issue 29: this bookkeeping
    was a sixth of a 50,000-partition run).
    """
    valid, shared = _top_generation_claims(cluster, group)
    if not shared:
        return valid, shared
    return {tp: mid for tp, mid in valid.items() if tp not in shared}, shared


def contested_partitions(cluster: Cluster, group: ConsumerGroup) -> dict[TopicPartition, list[str]]:
    """Partitions claimed by several members of the newest generation, with those members.

    Both may be consuming it, so a cooperative round gives it to nobody and
    asks every claimer to revoke it; the follow-up round hands it out.
    """
    return _top_generation_claims(cluster, group)[1]


def withhold_moving(
    assignment: Mapping[str, Iterable[TopicPartition]],
    owners: Mapping[TopicPartition, str],
    contested: Mapping[TopicPartition, Iterable[str]] | None = None,
) -> ConsumerPlan:
    """Cooperative rebalancing: a partition that changes owner is given to nobody this round.

    It is listed under ``revoked`` for its previous owner; the follow-up round
    (after the owner confirms the release) hands it to its new member.  A
    contested partition (see :func:`contested_partitions`) is withheld too and
    listed under every claimer.  Lists come out sorted.
    """
    contested = contested or {}
    kept: dict[str, list[TopicPartition]] = {}
    revoked: dict[str, list[TopicPartition]] = {}
    for mid, parts in assignment.items():
        keep = kept.setdefault(mid, [])
        for tp in parts:
            if tp in contested:
                for claimer in contested[tp]:
                    revoked.setdefault(claimer, []).append(tp)
                continue
            prev = owners.get(tp)
            if prev is None or prev == mid:
                keep.append(tp)
            else:
                revoked.setdefault(prev, []).append(tp)
    # A member that stays owner of nothing it claimed still lists what it lost.
    return ConsumerPlan(
        assignment={m: sorted(v) for m, v in kept.items()},
        revoked={m: sorted(v) for m, v in sorted(revoked.items())},
    )


def count_moved(
    plan: ConsumerPlan, owners: Mapping[TopicPartition, str], subscribed: Container[TopicPartition]
) -> int:
    """Subscribed partitions whose valid previous owner no longer holds them (withheld included).

    Only the previous owners' own lists are indexed: the cost follows the
    claims, not the size of the whole plan.
    """
    held: dict[str, set[TopicPartition]] = {}
    moved = 0
    for tp, prev in owners.items():
        if tp not in subscribed:
            continue
        mine = held.get(prev)
        if mine is None:
            mine = held[prev] = set(plan.assignment.get(prev, ()))
        if tp not in mine:
            moved += 1
    return moved
