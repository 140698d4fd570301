"""One cycle as named steps: intake -> checks -> plan -> publish -> alert, then the status view.

Rank 9: imports :mod:`.ha` and below.  :func:`.run.run_cycle` is the whole cycle.
"""

__all__ = [
    "alerting",
    "checks",
    "cycle_metrics",
    "exhausted",
    "intake",
    "plan_step",
    "publishing",
    "run",
    "status",
]
