"""Whether assignment can help a group's cross-zone bill (issue 26 §5), as the agent says it per group.

Per group at baseline, with its registered assignor, in its own fetch mode:

- ``no cross-rack bytes``: its assignment reads nothing across racks;
- ``fixable by assignment``: it reads more across racks than the floor, the
  bytes of partitions that are cross-rack from every rack the group is in
  (:class:`~rackplan.fleet.figures.Figures`' ``unfixable_*``, the agent's
  :func:`~rackplan.agent.planning.fixable.floor_bytes` rule); the difference
  is what a better assignment can save, balance aside;
- ``not fixable by assignment``: it reads exactly the floor: what remains
  needs replicas where the consumers are (or consumers where the replicas are);
- ``traffic unknown``: no partition it reads has a known traffic figure.
"""

from __future__ import annotations

import html
from typing import Any

from .report_html import money
from .scenarios import BASELINE
from .units import OK

NONE = "no cross-rack bytes"
FIXABLE = "fixable by assignment"
NOT_FIXABLE = "not fixable by assignment"
UNKNOWN = "traffic unknown"
#: the locality table's columns this reads (absent from tables written before them: then no verdicts)
FLOOR_COLUMNS = [
    "cross_bytes_nearest",
    "cross_bytes_leader",
    "unfixable_bytes_nearest",
    "unfixable_bytes_leader",
    "unfixable_nearest_usd_month",
    "unfixable_leader_usd_month",
]
#: relative slack when comparing a sum of bytes/s with the floor summed in another order
_SLACK = 1e-9


def add_floor(loc: Any) -> None:
    """Own-mode floor columns on the locality frame (in place): ``unfixable_cost``, ``fixable_cost`` and the
    verdict ``assignment_can_help``; NaN and no verdict where the table predates the floor columns."""
    if any(c not in loc.columns for c in FLOOR_COLUMNS):
        loc["unfixable_cost"] = loc["fixable_cost"] = float("nan")
        loc["assignment_can_help"] = None
        return
    leader = loc["fetch_mode"] == "leader"
    cross = loc["cross_bytes_leader"].where(leader, loc["cross_bytes_nearest"]).astype(float)
    floor = loc["unfixable_bytes_leader"].where(leader, loc["unfixable_bytes_nearest"]).astype(float)
    loc["unfixable_cost"] = (
        loc["unfixable_leader_usd_month"].where(leader, loc["unfixable_nearest_usd_month"]).astype(float)
    )
    loc["fixable_cost"] = (loc["cost"].astype(float) - loc["unfixable_cost"]).clip(lower=0.0)
    verdict = []
    for c, f, known in zip(cross, floor, loc["pairs_with_traffic"].fillna(0), strict=True):
        if c != c or not known:  # NaN (not evaluated) or nothing measured
            verdict.append(UNKNOWN)
        elif c <= 0:
            verdict.append(NONE)
        elif c > f * (1 + _SLACK) + _SLACK:
            verdict.append(FIXABLE)
        else:
            verdict.append(NOT_FIXABLE)
    loc["assignment_can_help"] = verdict


def floor_totals(loc: Any) -> dict[str, Any]:
    """Over the groups at baseline with their registered assignor: today's cost split into what assignment
    can fix and what it cannot, and how many groups each verdict holds for."""
    ok = loc[(loc["status"] == OK) & (loc["scenario"] == BASELINE) & loc["registered"]]
    counts = ok["assignment_can_help"].value_counts()
    return {
        "groups": len(ok),
        "now": float(ok["cost"].sum()),
        "fixable": float(ok["fixable_cost"].fillna(0.0).sum()),
        "unfixable": float(ok["unfixable_cost"].fillna(0.0).sum()),
        "verdicts": {v: int(counts.get(v, 0)) for v in (FIXABLE, NOT_FIXABLE, NONE, UNKNOWN)},
    }


def floor_html(t: dict[str, Any]) -> str:
    """One paragraph: of today's cost, what a better assignment can remove and what it cannot."""
    n = t["verdicts"]
    if not t["groups"] or n[UNKNOWN] == t["groups"]:
        return '<p id="floor">Whether assignment can help: no group has known traffic.</p>'
    return (
        f'<p id="floor">Of today\'s {money(t["now"])} a month, <b>{money(t["fixable"])}</b> can be removed by '
        f"assignment alone and <b>{money(t['unfixable'])}</b> cannot: those partitions have no replica in any "
        "rack their group reads from (in leader fetch mode: no leader there), so only replicas moved to the "
        f"consumers' racks (or consumers to the replicas') remove it. Groups: {n[FIXABLE]:,} "
        f"{html.escape(FIXABLE)}, {n[NOT_FIXABLE]:,} {html.escape(NOT_FIXABLE)}, {n[NONE]:,} with "
        f"{html.escape(NONE)}, {n[UNKNOWN]:,} with {html.escape(UNKNOWN)}.</p>"
    )
