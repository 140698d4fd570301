"""Traffic the agent measures: bytes/s per partition from the Admin API, and what it costs.

Rank 5: imports :mod:`.cluster`, :mod:`.settings`, :mod:`.kafka`, :mod:`.core`.
"""

__all__ = ["pricing", "rates", "reads", "sampler", "selector"]
