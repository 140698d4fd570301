"""Paths the mock cluster cannot exercise; they run against a real cluster when KAFKA_BOOTSTRAP is set."""

from __future__ import annotations

import uuid

from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource

from agent.kafka_io import TopicSpec, ensure_topics
from agent.logging import get_logger


def test_create_topics_makes_a_compacted_plan_topic(kafka_bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    name = f"_rackplan.test.{uuid.uuid4().hex[:8]}"
    spec = TopicSpec(name, 1, {"cleanup.policy": "compact", "max.message.bytes": "16777216"})
    try:
        assert ensure_topics(admin, [spec], 15, get_logger("t")) == []
        assert ensure_topics(admin, [spec], 15, get_logger("t")) == []  # exists: nothing to do
        res = ConfigResource(ConfigResource.Type.TOPIC, name)
        configs = admin.describe_configs([res])[res].result(timeout=15)
        assert configs["cleanup.policy"].value == "compact"
        assert configs["max.message.bytes"].value == "16777216"
    finally:
        admin.delete_topics([name], request_timeout=15)
