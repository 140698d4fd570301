"""Which registered Kafka Streams client each live member of a classic Streams group is, hence its rack.

A classic Kafka Streams app (KIP-924 followers, or Kafka's own assignor) is a
consumer-protocol group named after its ``application.id``: DescribeConsumerGroups
lists one member per stream thread, holding its active tasks' source partitions
(standbys read no source: they hold none).  The member's rack is not in the
description (see :mod:`.membership`), and the registration names the client by
its process id, so the two are joined through what the registration says of the
client's thread consumers, else through the thread consumer's client.id, which
Kafka Streams builds as ``<client id>-StreamThread-<n>-consumer`` from the app's
``client.id``, by default ``<application.id>-<process id>``:

- a member whose member id or client id is exactly one of a registered client's
  ``consumer_client_ids`` is that client (the Java ``RackplanTaskAssignor``
  registers them from ``KafkaStreamsState.consumerClientIds()`` at the group
  leader, which in the classic protocol are the thread consumers' member ids):
  so an app with its own ``client.id``, whose process ids are Streams' UUIDs, is
  matched too.  An id that two clients claim (one ``client.id`` shared by
  several instances) names neither: a guess could give a member the wrong rack;
- else a member whose client id is ``<application.id>-<process id>`` or ``<process id>``
  is that registered client (every thread of one client matches it);
- otherwise the ``rack_mapping`` rules place it (client.id pattern, host CIDR);
- otherwise its rack is unknown: its partitions are counted apart, never local.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..settings.sections import RackRule
from .membership import MemberRacks, RealGroup, RealMember, racks_of

#: a stream thread's consumer: ``<Streams client id>-StreamThread-<n>-consumer`` (Kafka Streams' ClientUtils)
_THREAD_CONSUMER = re.compile(r"^(?P<client>.+)-StreamThread-\d+-consumer$")


def streams_client_id(consumer_client_id: str) -> str:
    """The Streams client id a stream thread's consumer client.id is built from (itself when not one)."""
    m = _THREAD_CONSUMER.match(consumer_client_id)
    return m["client"] if m else consumer_client_id


def consumers_of(clients: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Each registered thread consumer id -> its client; ids that two clients claim are left out."""
    owner: dict[str, Mapping[str, Any]] = {}
    claimed_twice: set[str] = set()
    for c in clients:
        ids = c.get("consumer_client_ids")
        for cid in ids if isinstance(ids, list) else ():
            if not isinstance(cid, str):
                continue
            first = owner.setdefault(cid, c)
            if first is not c and first.get("process_id") != c.get("process_id"):
                claimed_twice.add(cid)
    return {cid: c for cid, c in owner.items() if cid not in claimed_twice}


def match_clients(
    group: RealGroup, application_id: str, clients: Iterable[Mapping[str, Any]]
) -> tuple[dict[str, Mapping[str, Any]], list[RealMember]]:
    """The registered client of each live member that has one (member id -> it), and the members left over."""
    clients = list(clients)
    by_consumer = consumers_of(clients)
    by_name: dict[str, Mapping[str, Any]] = {}
    for c in clients:
        pid = str(c.get("process_id") or "")
        if pid:
            by_name.setdefault(pid, c)
            by_name.setdefault(f"{application_id}-{pid}", c)
    matched: dict[str, Mapping[str, Any]] = {}
    pending: list[RealMember] = []
    for m in group.members:
        found = by_consumer.get(m.member_id) or by_consumer.get(m.client_id)
        found = found or by_name.get(streams_client_id(m.client_id))
        if found is None:
            pending.append(m)
        else:
            matched[m.member_id] = found
    return matched, pending


def streams_member_racks(
    group: RealGroup, application_id: str, clients: Iterable[Mapping[str, Any]], rules: tuple[RackRule, ...]
) -> MemberRacks:
    """Rack of each live member of a classic Streams group: its registered client's, else the rules', else
    unknown (:func:`match_clients`)."""
    return racks_of(*match_clients(group, application_id, clients), rules)
