"""Counters at their bound: a plan key whose generation cannot go on (issue 24, item 7).

Generations and epochs are bounded when read (:func:`rackplan.agent.protocol.records.safe_int`,
2**53-1, what every JSON reader keeps exact) and never produced above the bound
(:meth:`rackplan.agent.state.plan_book.PlanBook.exhausted`, :func:`rackplan.agent.runtime.startup.next_epoch`).
An exhausted counter is reported here, once, and recovered from by the operator (docs/runbook.md).
"""

from __future__ import annotations

from ..metrics import declared as metric
from ..state.term import CycleReport, Term, Wiring


def generation_exhausted(w: Wiring, term: Term, key: str, report: CycleReport | None) -> None:
    """No plan for ``key``: its next generation would pass 2**53-1 (issue 24, item 7).

    Publishing 2**53 would give a record every reader refuses (this agent too, after a restart,
    which then took the forger's plan for its own).  Instead: skipped with the reason, an error
    event once per key, ``rackplan_counters_exhausted{counter="generation"}`` (the
    RackplanCounterExhausted alert) and the recovery of docs/runbook.md.  Its followers keep
    the plan they hold, and fall back to group subscription after ``plan_timeout_s`` if it
    does not name them.
    """
    why = (
        f"generation exhausted: the plan topic holds generation {term.book.next_generation(key) - 1} of {key}, "
        "the bound 2**53-1; no plan above it (docs/runbook.md#rackplancounterexhausted)"
    )
    g = term.group(key)
    if report is not None:
        report.skipped[key] = why
    w.metrics.set(metric.COUNTERS_EXHAUSTED, len(term.book.exhausted_keys()), {"counter": "generation"})
    if g.skip_logged != why:
        w.log.error("plan generation exhausted", key=key, reason=why)
        g.skip_logged = why
