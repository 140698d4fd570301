"""The agent's vocabulary every layer shares: typed seams (ports), logging, redaction of secrets.

Rank 1 (docs/architecture.md): imports only :mod:`rackplan.agent.protocol`.  A plan follower loads it.
"""

__all__ = ["logging", "ports", "redact"]
