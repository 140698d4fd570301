"""Who is in a group: registrations read from the topic, live membership (DescribeGroups), its locality and
which path assigns it (the agent's plans or the broker).

Rank 6: imports :mod:`.planning` and below.
"""

__all__ = ["basis", "live", "membership", "paths", "registered", "registry", "streams_members"]
