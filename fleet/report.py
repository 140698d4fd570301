"""``rackplan report``: the fleet job's Parquet tables as one static HTML page with PNG plots.

The page answers, worst first: which groups pay most for cross-rack reads
today, what each assignor would cost instead, and what each scenario would
do.  Figures are read in each group's own fetch mode (``fetch_mode`` of its
registration) unless a plot says otherwise.  Only the small tables are read
(no instances, no plans): the page of a fleet of thousands of groups is
built in seconds on the machine that runs the report, not on Spark.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rackplan.assignor.fields import one_line

from .assignment_help import FLOOR_COLUMNS, add_floor, floor_html, floor_totals
from .report_html import _CSS, folded, image, money, plural, table
from .report_plots import plots
from .scenarios import BASELINE
from .storage import filesystem, read_table, read_text
from .units import NOT_APPLICABLE, OK, RESULT_COLUMNS

LOCALITY_COLUMNS = [
    "cluster_id",
    "taken_at",
    "kind",
    "group",
    "scenario",
    "assignor",
    "registered",
    "reference",
    "fetch_mode",
    "status",
    "detail",
    "members",
    "partitions",
    "pairs",
    "pairs_with_traffic",
    "offline_partitions",
    "bytes_per_s",
    "cross_nearest",
    "cross_leader",
    "cost_nearest_usd_month",
    "cost_leader_usd_month",
    "moved",
    "max_minus_min",
    *FLOOR_COLUMNS,
]
WORST_GROUPS = 25
ASSIGNOR_COLUMNS = ["kind", "assignor", "groups", "cross_rack", "pairs", "cost_usd_month", "cost_nearest_usd_month", "cost_leader_usd_month", "saved_vs_registered_usd_month", "moves_needed"]  # fmt: skip
#: the kind of a row that stands for a whole snapshot that could not be read (``units.group_rows``)
SNAPSHOT_ROW = "snapshot"
#: the first columns of LOCALITY_COLUMNS, which every locality table has (keys, labels and status)
_LABELS = 11
#: the empty columns of a table with no file, by their type in ``units.RESULT_COLUMNS``
_EMPTY_DTYPES = {"string": "object", "boolean": "bool", "long": "float64", "double": "float64"}


class ReportError(RuntimeError):
    """The input directory does not hold the fleet job's tables."""


def _pd() -> Any:
    import pandas as pd  # type: ignore[import-untyped,import-not-found,unused-ignore]

    return pd


def load_locality(directory: str | Path) -> Any:
    """The locality table (a local path or any URI pyarrow reads) of the newest snapshot of each
    cluster, with own-mode figures added.

    A URI stays a URI (``s3://b/t`` is read from S3, never from a local folder ``s3:``); what
    cannot be read is a :class:`ReportError` naming ``directory``.  A table of no unit (the job
    read only snapshots without groups) has no file, hence no columns: it is read as no rows."""
    from pyarrow import fs as pafs  # type: ignore[import-untyped,import-not-found,unused-ignore]

    source = str(directory)
    table = f"{source.rstrip('/')}/locality"
    try:  # ArrowInvalid (an unknown scheme, a bad URI) is a ValueError, an unreachable store an OSError
        fs, root = filesystem(source)
        if fs.get_file_info(f"{root.rstrip('/')}/locality").type == pafs.FileType.NotFound:
            raise ReportError(f"{table}: no locality table (run `rackplan fleet` first)")
        loc = read_table(table, LOCALITY_COLUMNS).to_pandas()
    except (OSError, ValueError) as e:
        raise ReportError(f"--in {source}: cannot read the tables: {one_line(str(e))}") from e
    missing = [c for c in LOCALITY_COLUMNS if c not in loc.columns and c not in FLOOR_COLUMNS]
    absent = [c for c in LOCALITY_COLUMNS[:_LABELS] if c in missing]
    if len(loc) and absent:
        raise ReportError(f"{table}: not a table of `rackplan fleet` (no column {absent[0]})")
    types = dict(RESULT_COLUMNS)
    for c in missing:  # no file at all (no column); or a figure an older table lacks: unknown
        loc[c] = _pd().Series(dtype=_EMPTY_DTYPES[types[c]], index=loc.index)
    loc["cluster_id"] = loc["cluster_id"].astype(str)
    loc = newest(loc)
    leader = loc["fetch_mode"] == "leader"
    loc["cross"] = loc["cross_leader"].where(leader, loc["cross_nearest"])
    loc["cost"] = loc["cost_leader_usd_month"].where(leader, loc["cost_nearest_usd_month"])
    loc["cross_fraction"] = (loc["cross"] / loc["pairs"].where(loc["pairs"] > 0)).fillna(0.0)
    add_floor(loc)
    return loc


def newest(loc: Any) -> Any:
    """The rows of each cluster's newest snapshot (``fleet --history all`` writes every one).

    Times are compared as times: timestamps (schema 2) or RFC 3339 text (schema 1, ``+01:00``
    and ``Z`` alike); a row without a time (a snapshot whose ``taken_at`` did not parse, a bad
    snapshot's) is older than any time, so it stays only where its cluster has no other."""
    pd = _pd()
    when = loc["taken_at"]
    if not pd.api.types.is_datetime64_any_dtype(when):
        when = pd.to_datetime(when.astype("string"), utc=True, errors="coerce", format="ISO8601")
    rank = when.rank(method="dense", na_option="top")  # no time: rank 1, below every time
    return loc[rank == rank.groupby(loc["cluster_id"]).transform("max")].copy()


def worst_groups(loc: Any, n: int = WORST_GROUPS) -> Any:
    """Groups at baseline with their registered assignor, most expensive (then least local) first."""
    ok = loc[(loc["status"] == OK) & (loc["scenario"] == BASELINE) & loc["registered"]]
    ref = loc[(loc["status"] == OK) & (loc["scenario"] == BASELINE) & loc["reference"]]
    ref = ref.set_index(["cluster_id", "kind", "group"])[["cross", "cost", "cross_fraction", "moved"]]
    merged = ok.join(ref, on=["cluster_id", "kind", "group"], rsuffix="_ref")
    merged["saved"] = merged["cost"] - merged["cost_ref"]
    merged = merged.sort_values(
        ["cost", "cross_fraction", "cluster_id", "group"],
        ascending=[False, False, True, True],
        kind="mergesort",
    )
    return merged.head(n)


def assignor_totals(loc: Any) -> Any:
    """Fleet totals per assignor at baseline (own fetch mode), with what each saves against the registered ones."""
    pd = _pd()
    ok = loc[(loc["status"] == OK) & (loc["scenario"] == BASELINE)]
    registered = ok[ok["registered"]].groupby("kind")["cost"].sum()
    rows = []
    for (kind, assignor), sub in sorted(ok.groupby(["kind", "assignor"]), key=lambda kv: kv[0]):
        rows.append(
            {
                "kind": kind,
                "assignor": assignor,
                "groups": len(sub),
                "cross_rack": int(sub["cross"].sum()),
                "pairs": int(sub["pairs"].sum()),
                "cost_usd_month": float(sub["cost"].sum()),
                "cost_nearest_usd_month": float(sub["cost_nearest_usd_month"].sum()),
                "cost_leader_usd_month": float(sub["cost_leader_usd_month"].sum()),
                "saved_vs_registered_usd_month": float(registered.get(kind, 0.0) - sub["cost"].sum()),
                "moves_needed": int(sub["moved"].sum()),
            }
        )
    return pd.DataFrame(rows, columns=ASSIGNOR_COLUMNS)  # the columns even with no row: no unit evaluated


def scenario_totals(loc: Any) -> Any:
    """Per scenario: fleet cost and cross-rack pairs with the registered and the reference assignors,
    over the groups where it applies, next to the baseline cost of those same groups.

    ``applies`` is ``not applicable`` when the scenario matched no group (then no figure is given)."""
    pd = _pd()
    rows = []
    base = loc[(loc["scenario"] == BASELINE) & (loc["status"] == OK) & loc["registered"]]
    base_cost = base.set_index(["cluster_id", "kind", "group"])["cost"]
    for scenario, sub in loc.groupby("scenario", sort=False):
        if scenario == "":
            continue  # rows of bad snapshots
        ok = sub[sub["status"] == OK]
        reg, ref = ok[ok["registered"]], ok[ok["reference"]]
        keys = list(zip(reg["cluster_id"], reg["kind"], reg["group"], strict=True))
        applies = len(reg) > 0
        rows.append(
            {
                "scenario": scenario,
                "applies": "yes" if applies else "not applicable",
                "groups": int(reg.shape[0]),
                "not_applicable": int(
                    sub[sub["status"] != OK][["cluster_id", "group"]].drop_duplicates().shape[0]
                ),
                "cross_rack_registered": int(reg["cross"].sum()) if applies else None,
                "cross_rack_reference": int(ref["cross"].sum()) if applies else None,
                "cost_baseline_usd_month": float(base_cost.reindex(keys).fillna(0.0).sum())
                if applies
                else None,
                "cost_registered_usd_month": float(reg["cost"].sum()) if applies else None,
                "cost_reference_usd_month": float(ref["cost"].sum()) if applies else None,
                "moves_registered": int(reg["moved"].sum()) if applies else None,
                "moves_reference": int(ref["moved"].sum()) if applies else None,
                "offline_partitions": int(reg["offline_partitions"].sum()) if applies else None,
            }
        )
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    order = {BASELINE: 0}
    frame["_o"] = [order.get(s, 1) for s in frame["scenario"]]
    return frame.sort_values(["_o", "scenario"], kind="mergesort").drop(columns="_o").reset_index(drop=True)


def headline(loc: Any) -> dict[str, Any]:
    """The fleet's monthly cost now (each group with its registered assignor, own fetch mode, baseline),
    with the reference assignors instead, what that saves and the moves it takes; the groups counted
    are those evaluated with both."""
    ok = loc[(loc["status"] == OK) & (loc["scenario"] == BASELINE)]
    key = ["cluster_id", "kind", "group"]
    reg = ok[ok["registered"]].set_index(key)
    ref = ok[ok["reference"]].set_index(key)
    both = reg.index.intersection(ref.index)
    now = float(reg.loc[both, "cost"].sum()) if len(both) else 0.0
    best = float(ref.loc[both, "cost"].sum()) if len(both) else 0.0
    return {
        "units": len(loc),
        "groups": len(both),
        "now": now,
        "reference": best,
        "saved": now - best,
        "percent": 100 * (now - best) / now if now else 0.0,
        "moves": int(ref.loc[both, "moved"].sum()) if len(both) else 0,
    }


def headline_html(head: Mapping[str, Any], assignors: Any) -> str:
    """The page's first lines: cost now, under each assignor, and what switching saves; or why there
    is no cost to compare (no unit in the tables, or none evaluated with both assignors)."""
    saved = head["saved"]
    verdict = (
        f"<b>{money(saved)} saved a month</b> ({head['percent']:.0f} %), moving {head['moves']:,} partitions"
        if saved >= 0
        else f"<b>{money(-saved)} more a month</b>: the registered assignors are cheaper"
    )
    if not head["units"]:
        opening = "The tables hold no unit: no snapshot read has a consumer group or Streams app."
    elif not head["groups"]:
        opening = (
            "No group was evaluated at baseline with both its registered assignor and rack-optimal "
            "(Streams: min_traffic): there is no cost to compare. "
            '<a href="#problems">The units not evaluated</a> are listed below, with the reason.'
        )
    else:
        opening = (
            f"The fleet pays <b>{money(head['now'])}</b> a month for cross-zone reads today "
            f"({plural(head['groups'], 'group or app', 'groups and apps')}, each with its registered "
            f"assignor). With rack-optimal (Streams: min_traffic) it would pay "
            f"<b>{money(head['reference'])}</b>: {verdict}."
        )
    lines = ['<section id="headline">', f'<p class="big">{opening}</p>']
    if len(assignors):
        rows = "".join(
            f"<tr><td>{html.escape(str(r['kind']))}</td><td>{html.escape(str(r['assignor']))}</td>"
            f'<td class="num">{money(r["cost_usd_month"])}</td>'
            f'<td class="num">{money(r["saved_vs_registered_usd_month"])}</td></tr>'
            for r in assignors.to_dict("records")
        )
        lines.append(
            '<table class="headline"><thead><tr><th>kind</th><th>every group on</th><th>cost per month</th>'
            f"<th>saved vs today</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    lines.append("</section>")
    return "\n".join(lines)


def summary_html(loc: Any, scenarios: int, price: Any) -> str:
    """The line under the headline: what the tables hold.  The row of a snapshot that could not be
    read (its ``cluster_id`` is the file) counts as an invalid snapshot, not as a cluster or a group."""
    bad = loc["kind"] == SNAPSHOT_ROW
    read = loc[~bad]
    clusters = read["cluster_id"].nunique()
    groups = read[["cluster_id", "kind", "group"]].drop_duplicates().shape[0]
    invalid = loc.loc[bad, "cluster_id"].nunique()
    statuses = ", ".join(f"{k}: {v:,}" for k, v in sorted(loc["status"].value_counts().items())) or "none"
    price_note = f"{price} USD per GB crossing zones" if price is not None else "the job's price per GB"
    unread = f"; {plural(invalid, 'snapshot')} invalid (listed below)" if invalid else ""
    return (
        f'<p id="summary">{plural(clusters, "cluster")}, {plural(groups, "group or app", "groups and apps")}, '
        f"{plural(scenarios, 'scenario')}{unread}; units {html.escape(statuses)}. "
        f"Costs: {html.escape(price_note)}, 730 hours a month, consumer reads only.</p>"
    )


def price_per_gb(directory: str | Path) -> Any:
    """The run's price per GB (``summary.json``'s settings); None when it cannot be read."""
    try:
        summary = json.loads(read_text(f"{str(directory).rstrip('/')}/summary.json"))
    except (OSError, ValueError):
        return None
    settings = summary.get("settings") if isinstance(summary, dict) else None
    return settings.get("price_per_gb") if isinstance(settings, dict) else None


def render(directory: str | Path, out: str | Path) -> Path:
    """Write ``index.html`` and its PNGs to the local folder ``out`` (created); returns the page's path.

    ``directory``: a local path or a URI pyarrow's file systems read (kept a URI)."""
    dst = Path(out)
    dst.mkdir(parents=True, exist_ok=True)
    loc = load_locality(directory)
    worst = worst_groups(loc)
    assignors = assignor_totals(loc)
    scenarios = scenario_totals(loc)
    problems = loc[loc["status"] != OK].sort_values(["status", "cluster_id", "group", "scenario", "assignor"])
    problems = problems.assign(status=problems["status"].replace({NOT_APPLICABLE: "not applicable"}))
    not_applicable = problems[problems["status"] == "not applicable"]
    problems = problems[problems["status"] != "not applicable"]
    applies = scenarios[scenarios["applies"] == "yes"] if len(scenarios) else scenarios
    no_scenario = scenarios[scenarios["applies"] != "yes"] if len(scenarios) else scenarios
    images, head = plots(loc, worst, assignors, scenarios, dst), headline(loc)
    scenario_columns = ["scenario", "applies", "groups", "not_applicable", "cross_rack_registered", "cross_rack_reference", "cost_baseline_usd_month", "cost_registered_usd_month", "cost_reference_usd_month", "moves_registered", "moves_reference", "offline_partitions"]  # fmt: skip
    problem_columns = ["cluster_id", "group", "scenario", "assignor", "status", "detail"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>rackplan fleet report</title>',
        f"<style>{_CSS}</style></head><body>",
        "<h1>rackplan fleet report</h1>",
        headline_html(head, assignors) + ("\n" + floor_html(floor_totals(loc)) if head["groups"] else ""),
        summary_html(loc, len(scenarios), price_per_gb(directory)),
        '<h2 id="worst">Worst groups first</h2>',
        image(images["groups"], "monthly cross-zone cost of the most expensive groups"),
        table(
            worst,
            ["cluster_id", "kind", "group", "assignor", "fetch_mode", "pairs", "cross", "cost", "assignment_can_help", "fixable_cost", "unfixable_cost", "cross_ref", "cost_ref", "saved", "moved_ref"],
            WORST_GROUPS,
            "worst",
        ),
        '<h2 id="clusters">Locality per cluster</h2>',
        image(images["clusters"], "cross-rack fraction per cluster"),
        '<h2 id="assignors">Cost saved per assignor</h2>',
        image(images["assignors"], "monthly cost per assignor"),
        table(assignors, ASSIGNOR_COLUMNS),
        '<h2 id="scenarios">Scenario impact</h2>',
        image(images["scenarios"], "cost and moves per scenario"),
        table(applies, scenario_columns) if len(applies) else "<p>No scenario applies to any group.</p>",
        folded(
            f"{len(no_scenario):,} scenario{'s apply' if len(no_scenario) != 1 else ' applies'} to no group "
            "(not applicable: no figures)",
            table(no_scenario, ["scenario", "applies", "not_applicable"]),
        )
        if len(no_scenario)
        else "",
        '<h2 id="problems">Units not evaluated</h2>',
        table(problems, problem_columns, cls="problems")
        if len(problems)
        else "<p>None: every applicable unit was evaluated.</p>",
        folded(
            f"{len(not_applicable):,} units not applicable: the scenario changes nothing the group reads",
            table(not_applicable, problem_columns, cls="not-applicable"),
        )
        if len(not_applicable)
        else "",
        "</body></html>",
    ]  # fmt: skip
    page = dst / "index.html"
    page.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return page
