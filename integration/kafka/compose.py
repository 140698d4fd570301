"""Broker properties from ``docker-compose.yml``, by the rules of the apache/kafka image.

The compose file is the one place the cluster's configuration is written down;
the local launcher (:mod:`integration.kafka.cluster`) derives every node's
``server.properties`` from it, so a real broker exercises the compose settings
on every test run even though no Docker engine runs here.  Only what cannot
carry over to one machine is replaced: host names and ports of listeners and of
the controller quorum, and data directories.

The image's rule for environment variables (``docker/resources`` in
apache/kafka): every ``KAFKA_*`` variable but the JVM/logging ones becomes a
property by dropping the prefix, lower-casing, and reading ``___`` as ``-``,
``__`` as ``_`` and ``_`` as ``.``; ``CLUSTER_ID`` is the id the storage is
formatted with.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"

#: variables the image reads itself instead of turning them into properties
_NOT_PROPERTIES = frozenset(
    {
        "KAFKA_VERSION",
        "KAFKA_HEAP_OPTS",
        "KAFKA_LOG4J_OPTS",
        "KAFKA_OPTS",
        "KAFKA_JMX_OPTS",
        "KAFKA_JVM_PERFORMANCE_OPTS",
        "KAFKA_GC_LOG_OPTS",
        "KAFKA_LOG4J_ROOT_LOGLEVEL",
        "KAFKA_LOG4J_LOGGERS",
        "KAFKA_TOOLS_LOG4J_LOGLEVEL",
    }
)


class ComposeError(ValueError):
    """The compose file does not describe a cluster the launcher (or Kafka) can run."""


def env_to_property(name: str) -> str:
    """``KAFKA_LOG_RETENTION__MS___X`` -> ``log.retention_ms-x``: the apache/kafka image's mapping."""
    raw = name.removeprefix("KAFKA_").lower()
    return (
        raw.replace("___", "\0dash\0")
        .replace("__", "\0us\0")
        .replace("_", ".")
        .replace("\0dash\0", "-")
        .replace("\0us\0", "_")
    )


def check_cluster_id(cluster_id: str) -> None:
    """Kafka's ``Uuid`` form: 22 characters of URL-safe base64 (no padding) for 16 bytes.

    Kafka 4.3's StorageTool and broker store any string as the cluster id
    (measured: ``xyz`` formats and starts), but ``kafka-storage random-uuid``
    and every client that parses the id as a ``Uuid`` expect this form.
    """
    if not re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id):
        raise ComposeError(
            f"CLUSTER_ID {cluster_id!r}: Kafka wants 22 characters of URL-safe base64 "
            f"(16 bytes, as `kafka-storage random-uuid` prints), got {len(cluster_id)} characters"
        )
    try:
        raw = base64.urlsafe_b64decode(cluster_id + "==")
    except (binascii.Error, ValueError) as e:  # pragma: no cover - the pattern admits only the alphabet
        raise ComposeError(f"CLUSTER_ID {cluster_id!r}: not base64 ({e})") from None
    if len(raw) != 16:  # pragma: no cover - 22 characters always decode to 16 bytes
        raise ComposeError(f"CLUSTER_ID {cluster_id!r}: decodes to {len(raw)} bytes, not 16")


@dataclass(frozen=True)
class NodeSpec:
    """One Kafka service of the compose file, as properties."""

    service: str
    node_id: int
    roles: tuple[str, ...]
    rack: str | None
    properties: Mapping[str, str] = field(repr=False)

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles


@dataclass(frozen=True)
class ComposeCluster:
    """The Kafka part of the compose file: its cluster id, image and nodes."""

    cluster_id: str
    image: str
    nodes: tuple[NodeSpec, ...]

    @property
    def racks(self) -> tuple[str, ...]:
        return tuple(sorted({n.rack for n in self.nodes if n.rack is not None}))


def _node(service: str, env: Mapping[str, Any]) -> tuple[str, NodeSpec]:
    props = {
        env_to_property(k): str(v)
        for k, v in env.items()
        if k.startswith("KAFKA_") and k not in _NOT_PROPERTIES
    }
    if "CLUSTER_ID" not in env:
        raise ComposeError(f"services.{service}.environment: CLUSTER_ID is missing (KRaft needs it)")
    for key in ("node.id", "process.roles"):
        if key not in props:
            raise ComposeError(f"services.{service}.environment: {key} is missing")
    try:
        node_id = int(props["node.id"])
    except ValueError:
        raise ComposeError(f"services.{service}.environment.KAFKA_NODE_ID: not an integer") from None
    roles = tuple(r.strip() for r in props["process.roles"].split(",") if r.strip())
    spec = NodeSpec(service, node_id, roles, props.get("broker.rack"), props)
    return str(env["CLUSTER_ID"]), spec


def read_compose(text: str) -> ComposeCluster:
    """The Kafka services of a compose document (any service whose image is apache/kafka)."""
    doc = yaml.safe_load(text)
    services = doc.get("services") if isinstance(doc, dict) else None
    if not isinstance(services, dict):
        raise ComposeError("services: missing")
    ids: set[str] = set()
    images: set[str] = set()
    nodes: list[NodeSpec] = []
    for name, svc in services.items():
        image = str(svc.get("image", ""))
        if not image.startswith("apache/kafka"):
            continue
        cluster_id, spec = _node(name, svc.get("environment") or {})
        ids.add(cluster_id)
        images.add(image)
        nodes.append(spec)
    if not nodes:
        raise ComposeError("services: no apache/kafka service")
    if len(ids) != 1 or len(images) != 1:
        raise ComposeError(
            f"services: one CLUSTER_ID and one image expected, got {sorted(ids)} {sorted(images)}"
        )
    cluster_id = ids.pop()
    check_cluster_id(cluster_id)
    nodes.sort(key=lambda n: n.node_id)
    if len({n.node_id for n in nodes}) != len(nodes):
        raise ComposeError("services: KAFKA_NODE_ID values repeat")
    return ComposeCluster(cluster_id, images.pop(), tuple(nodes))


def load_compose(path: Path = COMPOSE_FILE) -> ComposeCluster:
    return read_compose(path.read_text())


def listener_names(value: str) -> list[str]:
    """``INTERNAL://:9092,EXTERNAL://:19091`` -> ``["INTERNAL", "EXTERNAL"]``."""
    return [part.split("://", 1)[0].strip() for part in value.split(",") if part.strip()]
