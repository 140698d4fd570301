"""What persists between cycles: one record per plan key in a :class:`~.term.Term`, and the plan book.

Rank 7: imports :mod:`.groups`, :mod:`.alerts` and below.
"""

__all__ = ["plan_book", "term"]
