"""A registration and a snapshot in, a plan out: the assignor's callers, handovers, unknown racks and topics.

Rank 5: imports :mod:`.cluster` and below, and the assignor's public API.
"""

__all__ = ["fixable", "handover", "planner", "rack_check", "subscriptions", "traffic_input"]
