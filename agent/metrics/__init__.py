"""The agent's Prometheus metrics: declared once as objects, the registry and its text exposition, the process's gauges.

Rank 2: imports only :mod:`rackplan.agent.protocol` (and prometheus_client).
"""

__all__ = ["declared", "exposition", "process_stats", "registry"]
