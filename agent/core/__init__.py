"""The agent's vocabulary every layer shares: its exceptions, typed seams (ports), logging, redaction.

Rank 0 (docs/architecture.md): imports nothing of the agent.  A plan follower loads it.
"""

__all__ = ["errors", "logging", "ports", "redact"]
