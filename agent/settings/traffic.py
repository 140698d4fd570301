"""The ``traffic:`` and ``prices:`` sections: how the agent measures bytes/s, and what a byte costs.

docs/settings.md lists every key; docs/agent.md ("Traffic") says what each figure means.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, ValidationInfo

from .section_base import AdminRequestS, Section


class TrafficSettings(Section):
    """Bytes/s per partition from ListOffsets end offsets, over a sliding window."""

    #: sample end offsets each cycle; off: no traffic, every plan and figure as without it
    enabled: bool = True
    #: a rate is the slope between the oldest and the newest sample in this window
    window_s: float = Field(default=300.0, ge=1.0)
    #: samples of a partition in the window before it has a rate
    min_samples: int = Field(default=2, ge=2, le=100_000)
    #: average bytes per record (as fetched), for topics not in ``topic_record_bytes``
    record_bytes: float = Field(default=1024.0, gt=0)
    #: topic -> average bytes per record
    topic_record_bytes: dict[str, float] = Field(default_factory=dict)
    #: per ListOffsets request (the operation gets 5 s more, unwatched): a sample waits at most this long
    request_timeout_s: AdminRequestS = Field(default=5.0, gt=0)
    #: attempts per sample for partitions whose error clears by itself; then the sample goes without them
    max_attempts: int = Field(default=1, ge=1, le=100)
    backoff_initial_s: float = Field(default=0.5, gt=0)
    backoff_max_s: float = Field(default=5.0, gt=0)
    #: a plan for traffic alone needs both: this many cross-rack bytes/s saved ...
    replan_min_bytes_per_second: float = Field(default=1_000_000.0, ge=0)
    #: ... and this share of the plan of record's cross-rack bytes/s (0-1)
    replan_min_fraction: float = Field(default=0.2, ge=0, le=1)
    #: sample each planned consumer group's committed offsets (one request per group) for what it reads
    group_reads: bool = True
    #: every broker's replica.selector.class is asked this often (DescribeConfigs); 0: never asked
    replica_selector_check_s: float = Field(default=600.0, ge=0)
    #: attempts per check for brokers whose error clears by itself
    replica_selector_attempts: int = Field(default=3, ge=1, le=100)

    def bytes_per_record(self, topic: str) -> float:
        """The average record size the rates of ``topic`` are multiplied by."""
        size = self.topic_record_bytes.get(topic)
        return self.record_bytes if size is None else size


def samples_fit_the_window(traffic: TrafficSettings, info: ValidationInfo) -> TrafficSettings:
    """``traffic`` once its window can hold ``min_samples`` samples taken ``poll_interval_s`` apart.

    One sample is taken a cycle, cycles start at least ``poll_interval_s`` apart: a window shorter than
    ``(min_samples - 1) x poll_interval_s`` never holds enough and nothing is ever measured, silently.
    Refused when the operator set ``traffic.window_s`` or ``traffic.min_samples``; with both at their
    defaults (a long ``poll_interval_s`` alone, which loaded before) the meter says so in a warning
    instead, at its second sample (:class:`rackplan.agent.traffic.sampler.TrafficMeter`).
    """
    poll = info.data.get("poll_interval_s")
    need = None if poll is None else (traffic.min_samples - 1) * poll
    chosen = traffic.model_fields_set & {"window_s", "min_samples"}
    if traffic.enabled and chosen and need is not None and traffic.window_s < need:
        samples = (
            "" if traffic.min_samples == 2 else f" x (traffic.min_samples - 1 = {traffic.min_samples - 1})"
        )
        raise ValueError(
            f"traffic.window_s ({traffic.window_s:g} s) is shorter than poll_interval_s ({poll:g} s){samples}: "
            f"one sample is taken a poll, so no window would hold traffic.min_samples ({traffic.min_samples}) "
            f"of them and nothing would be measured; set traffic.window_s to at least {need:g} s, "
            "or traffic.enabled: false"
        )
    return traffic


#: the ``traffic:`` section as the agent's settings hold it: checked against their ``poll_interval_s``
CheckedTraffic = Annotated[TrafficSettings, AfterValidator(samples_fit_the_window)]


class PriceSettings(Section):
    """What cross-rack bytes cost, for the dollar figures (metrics, /v1/plans, alerts)."""

    #: dollars per GB (10^9 bytes) crossing between racks, charged on each side (out of one zone, into another)
    cross_az_per_gb: float = Field(default=0.01, ge=0)
