"""Paths the mock cluster cannot exercise; they run against a real cluster when KAFKA_BOOTSTRAP is set."""

from __future__ import annotations

import time
import uuid

from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.cimpl import NewTopic

from rackplan.agent.core.logging import get_logger
from rackplan.agent.kafka.timeouts import admin_client_config, operation_timeout_s
from rackplan.agent.kafka.topics import TopicSpec, ensure_topics


def test_create_topics_makes_a_compacted_plan_topic(kafka_bootstrap: str) -> None:
    admin = AdminClient(admin_client_config({"bootstrap.servers": kafka_bootstrap}, 15))
    name = f"_rackplan.test.{uuid.uuid4().hex[:8]}"
    spec = TopicSpec(name, 1, {"cleanup.policy": "compact", "max.message.bytes": "16777216"})
    try:
        assert ensure_topics(admin, [spec], 15, get_logger("t")) == []
        assert ensure_topics(admin, [spec], 15, get_logger("t")) == []  # exists: nothing to do
        res = ConfigResource(ConfigResource.Type.TOPIC, name)
        deadline = time.monotonic() + 30
        while True:  # the broker DescribeConfigs reaches may learn the new topic a moment later
            try:
                configs = admin.describe_configs([res])[res].result(timeout=15)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert configs["cleanup.policy"].value == "compact"
        assert configs["max.message.bytes"].value == "16777216"
    finally:
        admin.delete_topics([name], request_timeout=operation_timeout_s(15))


def test_describe_groups_gives_real_members_and_mapped_racks(kafka_bootstrap: str) -> None:
    """What the mock cannot answer: a live group's members, their client.id and host, their assignment."""
    import time

    from confluent_kafka import Consumer

    from rackplan.agent.groups.membership import GroupDescriber, member_racks
    from rackplan.agent.groups.registry import merge_registrations
    from rackplan.agent.metrics.registry import Metrics
    from rackplan.agent.settings.sections import MembershipSettings, RackRule, Settings

    admin = AdminClient(admin_client_config({"bootstrap.servers": kafka_bootstrap}, 15))
    topic = f"_rackplan.test.{uuid.uuid4().hex[:8]}"
    group = f"rackplan-test-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(timeout=15)
    consumer = Consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": group, "client.id": "legacy-az-b-1"}
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment(), "the consumer never joined its group"
        describer = GroupDescriber(
            admin, MembershipSettings(), Metrics(), get_logger("t"), request_timeout_s=15
        )
        real = describer.describe([group])[group]
        assert describer.enabled and describer.unsupported is None
        (m,) = real.members
        assert m.client_id == "legacy-az-b-1" and m.host and not m.host.startswith("/")
        assert sorted(p for _, p in m.assignment) == [0, 1, 2, 3]
        rules = (RackRule(rack="az-b", client_id="legacy-az-b-*"),)
        assert member_racks(real, [], rules).racks == {m.member_id: "az-b"}
        settings = Settings.model_validate(
            {
                "consumer_groups": [{"group_id": group, "members": [], "topics": [topic]}],
                "rack_mapping": [{"client_id": "legacy-az-b-*", "rack": "az-b"}],
            }
        )
        (reg,) = merge_registrations(settings, [], {group: real}).registrations
        assert reg.source == "file+discovered"
        assert reg.spec["members"] == [{"member_id": m.member_id, "rack": "az-b", "topics": [topic]}]
    finally:
        consumer.close()
        admin.delete_topics([topic], request_timeout=operation_timeout_s(15))
