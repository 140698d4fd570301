"""``rackplan demo``: the agent on an embedded multi-rack cluster, a broker decommissioned.

Rank 11: imports :mod:`.runtime` and below.
"""

__all__ = ["options", "run", "summary"]
