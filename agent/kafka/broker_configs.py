"""One broker setting read from every broker with DescribeConfigs: what each said, and who would not say.

Used for ``replica.selector.class`` (KIP-392): a consumer reads from a
replica in its own rack only when the broker that leads the partition sets
the rack-aware selector, so each broker is asked (a BROKER resource is
answered by that broker alone, and librdkafka takes one BROKER resource per
request: one request per broker, all in flight at once).  Every future is
waited for within :func:`~.timeouts.result_timeout_s`; a Kafka error is a
name in ``failed``, never an exception.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..core.ports import AdminPort
from .errors import error_name
from .timeouts import operation_timeout_s, result_timeout_s


@dataclass(frozen=True, slots=True)
class BrokerValues:
    """broker id -> the setting's value (None: not set, the broker's default); broker id -> error name."""

    values: dict[int, str | None] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)


def broker_setting(admin: AdminPort, brokers: Iterable[int], name: str, timeout_s: float) -> BrokerValues:
    """DescribeConfigs of ``name`` on each of ``brokers``; never raises for a Kafka error."""
    from confluent_kafka.admin._config import ConfigResource

    out = BrokerValues()
    pending: dict[int, tuple[Any, Any]] = {}
    for b in sorted(set(brokers)):
        resource = ConfigResource(ConfigResource.Type.BROKER, str(b))
        try:
            futures = admin.describe_configs([resource], request_timeout=operation_timeout_s(timeout_s))
        except Exception as e:  # the request could not even be made (no broker, bad arguments)
            out.failed[b] = error_name(e)
            continue
        pending[b] = (resource, futures)
    for b, (resource, futures) in pending.items():
        try:
            future = futures.get(resource) or next(iter(futures.values()))
            configs = future.result(timeout=result_timeout_s(timeout_s))
        except Exception as e:  # the broker refused (authorizer, unsupported) or did not answer
            out.failed[b] = error_name(e, "_NO_ANSWER")
            continue
        value = getattr(configs.get(name), "value", None)
        out.values[b] = str(value) if value not in (None, "") else None
    return out
