"""Locality alerts: the state machine that raises and clears them, and the webhook that delivers them.

Rank 5: imports :mod:`.cluster` and below (not :mod:`.planning`).
"""

__all__ = ["rules", "webhook"]
