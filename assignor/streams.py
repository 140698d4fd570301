"""Kafka Streams task assignment (KIP-925): not implemented yet."""

from __future__ import annotations

from typing import Any

from .model import Cluster, StreamsApp


def plan_document(cluster: Cluster, app: StreamsApp) -> dict[str, Any]:
    raise NotImplementedError("streams_app: Kafka Streams assignment is not supported yet")
