"""The broker plugins' traffic feed records: their bytes (shared with the Java reader), and when they are due."""

from __future__ import annotations

import json

from rackplan.agent.protocol.mac import record_mac
from rackplan.agent.traffic.publish import TrafficFeed, encode_traffic, traffic_key

#: the same record and MAC are in clients/java's TrafficStoreTest (readsTheAgentsRecord)
KNOWN_VALUE = b'{"schema":1,"topic":"orders","bytes_per_s":[1200.0,35.5,0.0],"window_s":300.0,"measured_at_ms":1795000000000}'
KNOWN_MAC = b"hmac-sha256:2d5c8b4b162c5b20a09250d564cdc2c400b423bd22edb7ffc03389ccb3f5be19"


def test_a_topics_record_is_the_known_answer_the_java_reader_checks() -> None:
    value = encode_traffic("orders", (1200.0, 35.5, 0.0), 300, 1_795_000_000_000)
    assert value == KNOWN_VALUE
    assert traffic_key("orders") == "traffic/orders"
    assert record_mac(b"k", "_rackplan.traffic", b"traffic/orders", value) == KNOWN_MAC


def test_figures_are_rounded_to_a_thousandth() -> None:
    doc = json.loads(encode_traffic("t", (1 / 3, 2.0), 60.0, 5))
    assert doc["bytes_per_s"] == [0.333, 2.0] and doc["window_s"] == 60.0


def test_due_only_when_measured_and_a_window_after_the_last_confirmed_publish() -> None:
    feed = TrafficFeed(window_s=100)
    assert not feed.due({}, 0.0)
    traffic = {"b": (1.0,), "a": (2.0, 3.0)}
    assert feed.due(traffic, 0.0)
    assert [k for k, _ in feed.records(traffic, 7)] == ["traffic/a", "traffic/b"]
    feed.confirmed(traffic, 10.0)
    assert not feed.due(traffic, 109.9)
    assert feed.due(traffic, 110.0)


def test_a_topic_no_longer_measured_gets_a_tombstone_once() -> None:
    feed = TrafficFeed(window_s=1)
    feed.confirmed({"a": (1.0,), "b": (2.0,)}, 0.0)
    now = {"a": (1.5,)}
    records = feed.records(now, 9)
    assert records[-1] == ("traffic/b", None) and [k for k, _ in records] == ["traffic/a", "traffic/b"]
    feed.confirmed(now, 5.0)
    assert [k for k, _ in feed.records(now, 9)] == ["traffic/a"]
