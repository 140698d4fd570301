"""The agent's Prometheus metrics: the registry and its text exposition, and the process's own gauges.

Rank 2: imports only :mod:`rackplan.agent.protocol`.
"""

__all__ = ["process_stats", "registry"]
