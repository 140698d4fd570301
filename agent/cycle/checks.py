"""The check step: what is wrong with a registration that planning works around, said where operators look.

Two mistakes of one member used to go unnoticed or stop a whole group:

- a rack that no broker has (:mod:`.rack_check`): planned as registered, but
  every partition it reads is cross-rack;
- a subscription to a topic that does not exist (:mod:`.subscriptions`):
  left out of the plan, which the other members get as usual.

Each is kept on the group's record (``/v1/groups``, the plan's reason), set
as a gauge per group, and logged once per distinct finding, with the nearest
names the cluster does have.
"""

from __future__ import annotations

from ..cluster.metadata import Snapshot
from ..metrics import declared as metric
from ..planning.rack_check import unmatched_racks
from ..planning.subscriptions import missing_topics, with_suggestions
from ..protocol.plans import CONSUMER
from ..state.term import Term, Wiring, labels


def check_registrations(w: Wiring, term: Term, snap: Snapshot) -> None:
    """Rack mismatches and missing topics of every registration, against the racks seen and ``snap``'s topics."""
    broker_racks = frozenset(term.known.values())
    for reg in term.regs:
        g = term.group(reg.key)
        memo = g.checked
        if memo is not None and memo[0] == reg.fingerprint and memo[1] is snap and memo[2] == broker_racks:
            continue  # same registration, snapshot and racks: same findings (a large group is not walked again)
        g.checked = (reg.fingerprint, snap, broker_racks)
        lab = labels(reg.key)
        mismatches = unmatched_racks(reg, broker_racks)
        if mismatches != g.rack_mismatches and mismatches:
            w.log.warning(
                "member rack matches no broker",
                key=reg.key,
                members=[m.as_json() for m in mismatches],
                broker_racks=sorted(r for r in broker_racks if r),
            )
        g.rack_mismatches = mismatches
        w.metrics.set(metric.MEMBER_RACKS_UNKNOWN, len(mismatches), lab)
        if reg.kind != CONSUMER:
            continue
        pairs = missing_topics(reg.spec, snap.topics)
        if pairs != tuple((m.member, m.topic) for m in g.missing_topics):
            g.missing_topics = with_suggestions(pairs, snap.topics)
            if pairs:
                w.log.warning(
                    "subscription to an unknown topic left out of the plan",
                    key=reg.key,
                    subscriptions=[m.as_json() for m in g.missing_topics],
                )
        w.metrics.set(metric.UNKNOWN_TOPIC_SUBSCRIPTIONS, len(pairs), lab)
