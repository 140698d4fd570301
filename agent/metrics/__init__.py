"""The agent's Prometheus metrics: the registry and its text exposition, and the process's own gauges.

Rank 1: imports only :mod:`rackplan.agent.protocol`.
"""

__all__ = ["process_stats", "registry"]
