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
    "plans_cli",
    "plans_diff",
    "plans_explain",
    "plans_io",
    "plans_record",
    "plans_text",
    "preflight",
    "signals",
    "startup",
    "startup_retry",
    "supervisor",
    "watch",
]
