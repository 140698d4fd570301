"""What the brokers say: the metadata snapshot, its diff from the last one, the fleet archive format.

Rank 4: imports :mod:`.settings`, :mod:`.kafka`, :mod:`.core`.
"""

__all__ = ["archive", "diff", "metadata"]
