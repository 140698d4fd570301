"""The demo's terminal story: plain-text sections, flushed as written, and its plan and alert rows.

Plain text, no colours or cursor tricks: it reads the same in a terminal, a pipe or a CI log.
"""

from __future__ import annotations

import textwrap
from typing import TextIO

from ..protocol.alerts import FIRING, UNFIXABLE, AlertEvent
from ..protocol.plans import PlanRecord

WIDTH = 100


class Summary:
    """Plain-text sections, flushed as they are written."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def line(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def wrapped(self, text: str, indent: str) -> None:
        for row in textwrap.wrap(
            text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False
        ):
            self.line(row)

    def section(self, title: str) -> None:
        self.line()
        self.line(title)


def pct(cross: int, total: int) -> str:
    return f"{cross}/{total} ({cross / total:.0%})" if total else "0/0"


def plan_rows(s: Summary, plans: list[PlanRecord], with_before: bool) -> None:
    head = "cross-rack: old plan now -> new plan" if with_before else "cross-rack"
    s.line(f"  {'key':<20} {'gen':>3} {'moved':>5}  {head}")
    for p in sorted(plans, key=lambda p: p.key):
        a = pct(p.locality_after.cross_rack, p.locality_after.total)
        if with_before:
            b = (
                "-"
                if p.locality_before is None
                else pct(p.locality_before.cross_rack, p.locality_before.total)
            )
            a = f"{b} -> {a}"
        s.line(f"  {p.key:<20} {p.generation:>3} {p.moved:>5}  {a}")
        if with_before:
            s.wrapped(f"reason: {p.reason}", " " * 4)


def alert_rows(s: Summary, alerts: list[AlertEvent]) -> None:
    if not alerts:
        s.line("  (none)")
    for a in alerts:
        if a.status == UNFIXABLE:
            what = f"{a.current:.0%} cross-rack; no assignment gets under"
        elif a.status == FIRING and a.reason.startswith("initial state"):
            what = f"{a.current:.0%} cross-rack already at start"
        elif a.status == FIRING:
            what = f"{a.previous:.0%} -> {a.current:.0%} cross-rack after the change"
        else:
            what = f"back to {a.current:.0%} cross-rack"
        planned = "" if a.planned is None or a.status != FIRING else f"; new plan {a.planned:.0%}"
        s.line(f"  {a.status.upper():<8} {a.key:<20} {what}{planned} (threshold {a.threshold:.0%})")
