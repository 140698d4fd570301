"""This process's CPU, memory, file descriptors and start time: prometheus_client's ``ProcessCollector``.

The standard ``process_*`` metrics under their standard names, read from
``/proc/self`` at scrape time (where there is no ``/proc``, not Linux, there
are none).  The one thing added is the agent's ``cluster`` label, so that with
``cluster_name`` set every sample of the exposition carries it.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.metrics_core import Metric
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

#: name -> (type, help) of what :class:`ProcessCollector` exposes on Linux (the names the agent had before it)
PROCESS_METRICS: dict[str, tuple[str, str]] = {
    "process_cpu_seconds_total": ("counter", "Total user and system CPU time spent in seconds."),
    "process_resident_memory_bytes": ("gauge", "Resident memory size in bytes."),
    "process_virtual_memory_bytes": ("gauge", "Virtual memory size in bytes."),
    "process_start_time_seconds": ("gauge", "Start time of the process since unix epoch in seconds."),
    "process_open_fds": ("gauge", "Number of open file descriptors."),
    "process_max_fds": ("gauge", "Maximum number of open file descriptors."),
}

_COLLECTOR = ProcessCollector(registry=None)


def process_families(labels: Mapping[str, str]) -> list[Metric]:
    """The process metrics now, each sample with ``labels`` added (empty: as prometheus_client has them)."""
    families = list(_COLLECTOR.collect())
    if labels:
        for family in families:
            family.samples = [s._replace(labels={**s.labels, **labels}) for s in family.samples]
    return families


class LabelledProcessCollector(Collector):
    """A collector of :func:`process_families` with ``labels`` (the agent's registry registers one)."""

    def __init__(self, labels: Mapping[str, str]) -> None:
        self._labels = dict(labels)

    def collect(self) -> list[Metric]:
        return process_families(self._labels)


def process_values() -> dict[str, float]:
    """Sample name -> value of the process metrics now (only those this platform can tell)."""
    return {s.name: float(s.value) for f in process_families({}) for s in f.samples}
