"""The agent's topics: created when missing, waited for until led, their configuration checked.

Admin requests only (ListTopics, CreateTopics, DescribeConfigs), each bounded by
:mod:`.timeouts`; a refusal is logged with the command an operator can run instead.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..core.ports import AdminPort, Logger
from .errors import error_name, not_answerable, transient
from .exceptions import TopicReadError
from .timeouts import operation_timeout_s, result_timeout_s


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    config: Mapping[str, str]

    def command(self) -> str:
        """The kafka-topics.sh line an operator can run when the agent cannot create it."""
        conf = " ".join(f"--config {k}={v}" for k, v in sorted(self.config.items()))
        return (
            f"kafka-topics.sh --bootstrap-server <brokers> --create --topic {self.name} "
            f"--partitions {self.partitions} {conf}"
        ).strip()


def ensure_topics(
    admin: AdminPort, specs: list[TopicSpec], timeout_s: float, log: Logger, fallback: str | None = None
) -> list[TopicSpec]:
    """Create missing topics with CreateTopics; returns those still missing.

    ``fallback`` names another way the caller will create them (the embedded
    cluster's mock API): a refusal is then routine and logged at info, without
    the by-hand command.  Otherwise it is logged with the exact command to run.
    """
    from confluent_kafka.cimpl import NewTopic

    existing = set(admin.list_topics(timeout=timeout_s).topics)
    missing = [s for s in specs if s.name not in existing]
    if not missing:
        return []
    futures = admin.create_topics(
        [NewTopic(s.name, s.partitions, config=dict(s.config)) for s in missing],
        request_timeout=operation_timeout_s(timeout_s),
    )
    still: list[TopicSpec] = []
    created: list[str] = []
    for s in missing:
        try:
            futures[s.name].result(timeout=result_timeout_s(timeout_s))
            log.info("topic created", topic=s.name, partitions=s.partitions, config=dict(s.config))
            created.append(s.name)
        except Exception as e:
            name = error_name(e, "")
            if name == "TOPIC_ALREADY_EXISTS":
                continue
            still.append(s)
            if fallback is not None:
                log.info(
                    f"topic missing and the brokers do not create it; creating it through {fallback}",
                    topic=s.name,
                    broker_error=name or str(e),
                )
                continue
            log.error(
                "cannot create topic; create it by hand",
                topic=s.name,
                error=str(e),
                broker_lacks_create_topics=not_answerable(name),
                command=s.command(),
            )
    if created:
        wait_until_led(admin, created, timeout_s, log)
    return still


def wait_until_led(admin: AdminPort, topics: Sequence[str], timeout_s: float, log: Logger) -> bool:
    """Until every partition of ``topics`` has a leader in the metadata clients see.

    CreateTopics answers once the controller committed the topic; brokers learn
    it a moment later, and a reader or producer that asks in between is told
    UNKNOWN_TOPIC_OR_PART.  False (logged) when the deadline passes first.
    """
    deadline = time.monotonic() + timeout_s
    pending = list(topics)
    while True:
        try:
            md = admin.list_topics(timeout=max(0.5, deadline - time.monotonic()))
            pending = [
                t
                for t in topics
                if (tmd := md.topics.get(t)) is None
                or tmd.error is not None
                or not tmd.partitions
                or any(pm.leader < 0 for pm in tmd.partitions.values())
            ]
        except Exception as e:  # KafkaException: a transient metadata failure; the deadline decides
            log.debug("metadata not available yet", error=str(e))
        if not pending:
            return True
        if time.monotonic() >= deadline:
            log.warning("created topics have no leader yet", topics=pending, waited_s=timeout_s)
            return False
        time.sleep(0.1)


#: topic settings the agent relies on, and what breaks without them
REQUIRED_CONFIG_REASONS: Mapping[str, str] = {
    "cleanup.policy": "without compaction the topic loses every plan's last record to retention",
}


def topic_config_problems(
    admin: AdminPort, specs: Sequence[TopicSpec], timeout_s: float
) -> dict[str, str] | None:
    """What the existing topics' configuration lacks of ``specs`` (DescribeConfigs), by topic name.

    Checks that a spec asking for ``cleanup.policy=compact`` finds compaction
    on, and that ``max.message.bytes`` is at least the spec's.  None when the
    brokers cannot describe configs (librdkafka's mock cluster), so nothing is known.
    :class:`TopicReadError` for an error that clears by itself (a topic created a moment
    ago that the answering broker does not know yet): start-up asks again later
    (:mod:`rackplan.agent.runtime.startup_retry`), it is not a problem of the topic.
    """
    from confluent_kafka.admin._config import ConfigResource

    resources = {s.name: ConfigResource(ConfigResource.Type.TOPIC, s.name) for s in specs}
    try:
        futures = admin.describe_configs(
            list(resources.values()), request_timeout=operation_timeout_s(timeout_s)
        )
    except Exception:
        return None
    problems: dict[str, str] = {}
    for s in specs:
        try:
            configs = futures[resources[s.name]].result(timeout=result_timeout_s(timeout_s))
        except Exception as e:
            if not_answerable(e) or "not supported" in str(e).lower():
                return None
            if transient(e):
                raise TopicReadError(
                    f"topic {s.name!r}: configuration not readable yet: {e}", error_name(e, "")
                ) from e
            problems[s.name] = f"its configuration could not be read: {e}"
            continue
        want_policy = s.config.get("cleanup.policy", "")
        have_policy = getattr(configs.get("cleanup.policy"), "value", None) or ""
        if "compact" in want_policy and "compact" not in have_policy.split(","):
            problems[s.name] = (
                f"cleanup.policy is {have_policy!r}, not compact: {REQUIRED_CONFIG_REASONS['cleanup.policy']}; "
                f"fix: kafka-configs.sh --bootstrap-server <brokers> --alter --entity-type topics "
                f"--entity-name {s.name} --add-config cleanup.policy=compact"
            )
            continue
        want_max = s.config.get("max.message.bytes")
        have_max = getattr(configs.get("max.message.bytes"), "value", None)
        if want_max is not None and have_max is not None and int(have_max) < int(want_max):
            problems[s.name] = (
                f"max.message.bytes is {have_max}, below the {want_max} plans may need; "
                f"fix: kafka-configs.sh --bootstrap-server <brokers> --alter --entity-type topics "
                f"--entity-name {s.name} --add-config max.message.bytes={want_max}"
            )
    return problems
