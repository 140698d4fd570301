"""The cycle's traffic feed step: the window's measured bytes/s to ``traffic_topic`` for the broker plugins.

At most once per ``traffic.window_s`` and only with something measured
(:class:`~rackplan.agent.traffic.publish.TrafficFeed`); only while this agent
holds the lease; a publish the brokers do not confirm is counted
(``rackplan_publish_failures_total{record="traffic"}``), logged and tried again
the next cycle.  Never a reason for the cycle to fail.
"""

from __future__ import annotations

from ..ha.lease import LeaseUnconfirmed
from ..kafka.exceptions import PublishError
from ..metrics import declared as metric
from ..state.term import Term, Wiring
from ..traffic.publish import TrafficFeed
from ..traffic.sampler import TrafficMeter


def traffic_feed(w: Wiring, meter: TrafficMeter | None) -> TrafficFeed | None:
    """The feed, when traffic is measured, ``traffic_topic`` is set and the agent writes records (not observe)."""
    s = w.settings
    return (
        TrafficFeed(s.traffic.window_s) if meter is not None and s.traffic_topic and s.mode == "act" else None
    )


def feed_traffic(w: Wiring, term: Term, feed: TrafficFeed | None) -> int:
    """Publish the feed when due; the records published (0: not due, nothing measured, or not confirmed)."""
    topic = w.settings.traffic_topic
    now = w.clock()
    if feed is None or topic is None or w.publisher is None or not feed.due(term.traffic, now):
        return 0
    records = feed.records(term.traffic, int(now * 1000))
    try:
        w.guard()
        w.publisher.publish_many(topic, records, w.settings.io_timeout_s)
    except LeaseUnconfirmed as e:
        w.log.warning("lease not confirmed; traffic waits for the next cycle", error=str(e))
        return 0
    except PublishError as e:
        w.metrics.inc(metric.PUBLISH_FAILURES_TOTAL, {"record": "traffic"})
        w.log.warning("traffic not confirmed; will retry", topic=topic, error=str(e))
        return 0
    gone = len(feed.published - term.traffic.keys())
    feed.confirmed(term.traffic, now)
    w.log.info("traffic published", topic=topic, topics=len(term.traffic), tombstones=gone)
    return len(records)
