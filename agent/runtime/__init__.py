"""The process: start-up, the loop of cycles, the HTTP endpoint, signals, the supervisor.

Rank 10: imports :mod:`.cycle` and below.
"""

__all__ = [
    "check",
    "check_text",
    "http",
    "loop",
    "malloc_arenas",
    "observe",
    "preflight",
    "signals",
    "startup",
    "startup_retry",
    "supervisor",
    "watch",
]
