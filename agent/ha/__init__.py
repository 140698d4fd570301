"""One agent publishes at a time: the lease (a transactional id per epoch) and its heartbeat.

Rank 8: imports :mod:`.state` and below.
"""

__all__ = ["heartbeat", "leader_watch", "lease", "rejoin"]
