"""How soon rackplan's own Kafka clients stop believing that a live topic is gone.

librdkafka marks a topic it already knows as non-existent as soon as one Metadata
response lacks it (``topic.metadata.propagation.max.ms`` only shields topics whose
handle it has just created).  From then on a producer fails every record for that
topic at once with ``_UNKNOWN_TOPIC`` and a consumer stops fetching it, until a later
Metadata response names it again: with nothing else asking, the periodic refresh,
``topic.metadata.refresh.interval.ms``, five minutes by default.  A KRaft broker that
restarts can answer such responses while it catches up: in the chaos test on the real
cluster (a broker stopped and restarted, the leading agent killed) the surviving
followers' registration producers, and the test's own producer, failed that way for
the rest of the run, so the agent expired those followers every registration TTL and
tombstoned their group's plan over and over.  The clients rackplan makes therefore
refresh the metadata of the few topics they know every :data:`METADATA_REFRESH_MS`,
unless the settings name a value; the cost is one small Metadata request per client
per interval.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["METADATA_REFRESH_KEY", "METADATA_REFRESH_MS", "with_metadata_refresh"]

METADATA_REFRESH_KEY = "topic.metadata.refresh.interval.ms"
#: a topic wrongly reported missing is back within this long (librdkafka's default: 300,000)
METADATA_REFRESH_MS = 10_000


def with_metadata_refresh(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with :data:`METADATA_REFRESH_KEY` at :data:`METADATA_REFRESH_MS` unless it names one."""
    out = dict(config)
    out.setdefault(METADATA_REFRESH_KEY, METADATA_REFRESH_MS)
    return out
