"""Who is in a group: registrations read from the topic, live membership (DescribeGroups) and its locality.

Rank 6: imports :mod:`.planning` and below.
"""

__all__ = ["live", "membership", "registered", "registry"]
