"""What each consumer group really reads: its committed offsets sampled like the end offsets, over the same window.

The end offsets say what is produced, which is what a group that keeps up
fetches.  A group that is behind reads at the pace it commits (more than the
produce rate while it catches up), an idle one reads nothing, and one that
reads some of a topic's partitions commits only those.  So, for each consumer
group the agent plans, its committed offsets (ListConsumerGroupOffsets, one
request per group, :mod:`rackplan.agent.kafka.group_offsets`) are sampled each
cycle and turned into bytes/s by the same pure code as the end offsets
(:func:`.rates.record_rates` over ``traffic.window_s``, thinned by
:func:`.rates.add_sample`, times the topic's record size); a partition it
commits nothing for in the window reads 0.  A group that commits no offset
for its topics (offsets kept elsewhere, or not reading) has no figure, and a
failed request (logged once per distinct error) leaves that cycle's sample out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from ..core.ports import GroupOffsetsPort, Logger
from ..kafka.group_offsets import committed_offsets
from ..settings.traffic import TrafficSettings
from .rates import OffsetSample, add_sample, bytes_per_s, in_window, record_rates


@dataclass
class GroupReads:
    """Per group id, the committed-offset samples of the last ``traffic.window_s``."""

    admin: GroupOffsetsPort
    settings: TrafficSettings
    log: Logger
    samples: dict[str, tuple[OffsetSample, ...]] = field(default_factory=dict)
    #: group id -> the error last logged for it
    logged: dict[str, str] = field(default_factory=dict)

    def sample(self, groups: Mapping[str, Collection[str]], now: float) -> None:
        """One sample of each group's committed offsets on its topics (group id -> topics), taken at
        ``now`` (the end offsets' steady clock); groups no longer asked for are forgotten."""
        for gone in set(self.samples) - set(groups):
            del self.samples[gone]
        for group, topics in sorted(groups.items()):
            got = committed_offsets(self.admin, group, self.settings.request_timeout_s)
            if got.error:
                if self.logged.get(group) != got.error:
                    self.log.warning(
                        "committed offsets not read; the group's read rate waits for the next sample",
                        group=group,
                        error=got.error,
                    )
                self.logged[group] = got.error
            else:
                self.logged.pop(group, None)
            ends = {} if got.error else {tp: o for tp, o in got.offsets.items() if tp[0] in topics}
            held = self.samples.get(group, ())
            # without a new sample, what aged out of the window goes all the same: it measures nothing now
            kept = (
                add_sample(held, OffsetSample(now, ends), self.settings.window_s)
                if ends
                else in_window(held, now, self.settings.window_s)
            )
            if kept:
                self.samples[group] = kept
            else:
                self.samples.pop(group, None)

    def traffic(self, group: str, partitions: Mapping[str, int]) -> dict[str, tuple[float, ...]]:
        """Bytes/s ``group`` reads of each topic of ``partitions`` it commits offsets for (0: a partition
        it committed nothing for in the window)."""
        rates = record_rates(self.samples.get(group, ()), self.settings.min_samples)
        return bytes_per_s(rates, partitions, self.settings.bytes_per_record, unmeasured=0.0)
