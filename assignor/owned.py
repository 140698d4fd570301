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

from collections.abc import Collection, Iterable, Mapping

from .model import Cluster, ConsumerGroup, ConsumerPlan, TopicPartition


def _top_generation_claims(cluster: Cluster, group: ConsumerGroup) -> dict[TopicPartition, list[str]]:
    """Every existing partition claimed in the newest generation, with its claimers in input order."""
    if not group.members:
        return {}
    top = max(m.generation for m in group.members)
    claims: dict[TopicPartition, list[str]] = {}
    for m in group.members:
        if m.generation != top:
            continue
        for tp in m.owned:
            parts = cluster.topics.get(tp[0])
            if parts is None or tp[1] >= len(parts):
                continue
            who = claims.setdefault(tp, [])
            if m.member_id not in who:
                who.append(m.member_id)
    return claims


def previous_owners(cluster: Cluster, group: ConsumerGroup) -> dict[TopicPartition, str]:
    """Map each partition to the member that validly owned it, per the module rules.

    Claims are kept whether or not the member still subscribes to the topic:
    the member holds the partition until it revokes it, which matters for
    cooperative withholding.  Stickiness must check the subscription itself.
    """
    return {tp: who[0] for tp, who in _top_generation_claims(cluster, group).items() if len(who) == 1}


def contested_partitions(cluster: Cluster, group: ConsumerGroup) -> dict[TopicPartition, list[str]]:
    """Partitions claimed by several members of the newest generation, with those members.

    Both may be consuming it, so a cooperative round gives it to nobody and
    asks every claimer to revoke it; the follow-up round hands it out.
    """
    return {tp: who for tp, who in _top_generation_claims(cluster, group).items() if len(who) > 1}


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
    plan: ConsumerPlan, owners: Mapping[TopicPartition, str], subscribed: Collection[TopicPartition]
) -> int:
    """Subscribed partitions whose valid previous owner no longer holds them (withheld included)."""
    holder = {tp: m for m, parts in plan.assignment.items() for tp in parts}
    return sum(1 for tp, prev in owners.items() if tp in subscribed and holder.get(tp) != prev)
