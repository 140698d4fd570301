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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .assignment_help import FLOOR_COLUMNS, add_floor, floor_html, floor_totals
from .report_html import _CSS, folded, money, table
from .scenarios import BASELINE
from .storage import filesystem, read_table, read_text
from .units import NOT_APPLICABLE, OK

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
#: longest tick label on a plot; longer names are elided in the middle (the tables keep them whole)
LABEL_CHARS = 36


class ReportError(RuntimeError):
    """The input directory does not hold the fleet job's tables."""


def _pd() -> Any:
    import pandas as pd  # type: ignore[import-untyped,import-not-found,unused-ignore]

    return pd


def load_locality(directory: str | Path) -> Any:
    """The locality table (a local path or any URI pyarrow reads) of the newest snapshot of each
    cluster, with own-mode figures added."""
    from pyarrow import fs as pafs  # type: ignore[import-untyped,import-not-found,unused-ignore]

    fs, root = filesystem(str(directory))
    if fs.get_file_info(f"{root.rstrip('/')}/locality").type == pafs.FileType.NotFound:
        raise ReportError(f"{directory}/locality: no locality table (run `rackplan fleet` first)")
    loc = read_table(f"{str(directory).rstrip('/')}/locality", LOCALITY_COLUMNS).to_pandas()
    loc["cluster_id"] = loc["cluster_id"].astype(str)
    loc["taken_at"] = loc["taken_at"].astype(str)  # timestamps (schema 2) or text (schema 1) compare alike
    newest = loc.groupby("cluster_id")["taken_at"].transform("max")
    loc = loc[loc["taken_at"] == newest].copy()
    leader = loc["fetch_mode"] == "leader"
    loc["cross"] = loc["cross_leader"].where(leader, loc["cross_nearest"])
    loc["cost"] = loc["cost_leader_usd_month"].where(leader, loc["cost_nearest_usd_month"])
    loc["cross_fraction"] = (loc["cross"] / loc["pairs"].where(loc["pairs"] > 0)).fillna(0.0)
    add_floor(loc)
    return loc


def short(label: str, limit: int = LABEL_CHARS) -> str:
    """A label of at most ``limit`` characters (the middle elided), so plots keep their size."""
    return label if len(label) <= limit else label[: limit // 2 - 1] + "…" + label[-(limit - limit // 2) :]


def _money_axis(axis: Any) -> None:
    from matplotlib.ticker import FuncFormatter  # type: ignore[import-not-found,unused-ignore]

    axis.set_major_formatter(FuncFormatter(lambda x, _pos: money(x).replace("$", "\\$")))


def _plt() -> Any:
    import matplotlib  # type: ignore[import-not-found,unused-ignore]

    matplotlib.use("Agg")  # files only: no display, the same output everywhere
    import matplotlib.pyplot as plt  # type: ignore[import-not-found,unused-ignore]

    plt.rcParams.update(
        {"figure.dpi": 100, "font.size": 9, "axes.spines.top": False, "axes.spines.right": False}
    )
    return plt


def _save(fig: Any, path: Path) -> str:
    fig.tight_layout()
    # bbox "tight": rotated tick labels stay inside the image; no version stamp: same bytes
    fig.savefig(path, format="png", bbox_inches="tight", pad_inches=0.1, metadata={"Software": None})
    _plt().close(fig)
    return path.name


def _bars(
    ax: Any, labels: Sequence[str], series: Mapping[str, Sequence[float]], horizontal: bool = False
) -> None:
    labels = [short(str(label)) for label in labels]
    n = max(1, len(series))
    width = 0.8 / n
    for i, (name, values) in enumerate(series.items()):
        pos = [k + (i - (n - 1) / 2) * width for k in range(len(labels))]
        if horizontal:
            ax.barh(pos, values, height=width, label=name)
        else:
            ax.bar(pos, values, width=width, label=name)
    if horizontal:
        ax.set_yticks(range(len(labels)), labels)
        ax.invert_yaxis()
    else:
        ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    if len(series) > 1:
        ax.legend(fontsize=8)


def plot_clusters(loc: Any, out: Path) -> str:
    """Cross-rack fraction per cluster at baseline, registered vs reference assignors, both fetch modes."""
    plt = _plt()
    ok = loc[(loc["status"] == OK) & (loc["scenario"] == BASELINE)]
    clusters = sorted(ok["cluster_id"].unique())
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    for ax, (mode, col) in zip(
        axes, (("nearest replica", "cross_nearest"), ("leader only", "cross_leader")), strict=True
    ):
        series = {}
        for label, mask in (
            ("registered", ok["registered"]),
            ("rack-optimal / min_traffic", ok["reference"]),
        ):
            sub = ok[mask].groupby("cluster_id")[[col, "pairs"]].sum()
            series[label] = [
                float(sub.loc[c, col] / sub.loc[c, "pairs"])
                if c in sub.index and sub.loc[c, "pairs"]
                else 0.0
                for c in clusters
            ]
        _bars(ax, clusters, series)
        ax.set_title(f"cross-rack fraction per cluster ({mode})")
        ax.set_ylim(0, 1)
    return _save(fig, out / "locality_clusters.png")


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


def plot_groups(worst: Any, out: Path) -> str:
    """The worst groups' monthly cost (what the list is ordered by), registered vs reference, in USD."""
    plt = _plt()
    labels = [f"{c} / {g}" for c, g in zip(worst["cluster_id"], worst["group"], strict=True)]
    fig, ax = plt.subplots(figsize=(10, max(2.5, 0.32 * len(labels) + 1)))
    registered = [float(v) for v in worst["cost"]]
    reference = [float(v) for v in worst["cost_ref"].fillna(0.0)]
    _bars(
        ax,
        labels,
        {"registered assignor": registered, "rack-optimal / min_traffic": reference},
        horizontal=True,
    )
    for k, (cost, saved) in enumerate(zip(registered, worst["saved"].fillna(0.0), strict=True)):
        say = (
            f"saves {money(float(saved))}"
            if saved >= 0
            else f"the reference costs {money(-float(saved))} more"
        )
        ax.annotate(
            f"{money(cost)}/month, {say}".replace("$", "\\$"),  # \\$: a dollar, not mathtext
            (cost, k),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=7,
        )
    ax.set_xlim(0, max([*registered, *reference, 1.0]) * 1.35)  # room for the money labels
    _money_axis(ax.xaxis)
    ax.set_xlabel("cross-zone cost, USD per month (own fetch mode)")
    ax.set_title("most expensive groups: monthly cross-zone cost, registered vs reference assignor")
    return _save(fig, out / "locality_groups.png")


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
    return pd.DataFrame(rows)


def plot_assignors(totals: Any, out: Path) -> str:
    plt = _plt()
    labels = list(totals["assignor"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    _bars(
        axes[0],
        labels,
        {
            "nearest replica": list(totals["cost_nearest_usd_month"]),
            "leader only": list(totals["cost_leader_usd_month"]),
        },
    )
    axes[0].set_title("monthly cross-zone cost per assignor (USD, baseline)")
    _bars(axes[1], labels, {"saved": list(totals["saved_vs_registered_usd_month"])})
    axes[1].axhline(0, color="black", linewidth=0.6)
    axes[1].set_title("saved vs each group's registered assignor (USD/month)")
    for ax in axes:
        _money_axis(ax.yaxis)
    return _save(fig, out / "cost_saved.png")


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


def scenario_label(row: Mapping[str, Any]) -> str:
    """A scenario's tick label: its name, and what the bars cannot show (not applicable, offline data)."""
    name = short(str(row["scenario"]))
    if row["applies"] != "yes":
        return f"{name}\n(not applicable)"
    offline = row["offline_partitions"]
    return f"{name}\n{int(offline):,} partitions OFFLINE" if offline else name


def plot_scenarios(totals: Any, out: Path) -> str:
    plt = _plt()
    records = totals.to_dict("records")
    labels = [scenario_label(r) for r in records]

    def vals(col: str) -> list[float]:
        return [0.0 if r[col] is None or r[col] != r[col] else float(r[col]) for r in records]

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    _bars(
        axes[0],
        labels,
        {
            "baseline (same groups)": vals("cost_baseline_usd_month"),
            "registered": vals("cost_registered_usd_month"),
            "rack-optimal / min_traffic": vals("cost_reference_usd_month"),
        },
    )
    axes[0].set_title("monthly cross-zone cost per scenario (USD, own fetch mode)")
    _money_axis(axes[0].yaxis)
    for k, r in enumerate(records):
        if r["applies"] == "yes" and r["offline_partitions"]:
            # Offline partitions are read by nobody: cheaper, not better. Say so on the bars.
            axes[0].annotate(
                f"{int(r['offline_partitions']):,} offline:\nunread, not cheaper",
                (k, max(vals("cost_baseline_usd_month")[k], vals("cost_registered_usd_month")[k])),
                xytext=(0, 4),
                textcoords="offset points",
                ha="center",
                fontsize=7,
                color="#b00020",
            )
    _bars(
        axes[1],
        labels,
        {"registered": vals("moves_registered"), "rack-optimal / min_traffic": vals("moves_reference")},
    )
    axes[1].set_title("partitions / tasks moved to reach the plan")
    for ax in axes:
        for tick in ax.get_xticklabels():
            if "OFFLINE" in tick.get_text() or "not applicable" in tick.get_text():
                tick.set_color("#b00020")
    return _save(fig, out / "scenario_impact.png")


# ---- HTML ------------------------------------------------------------------------


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
        "groups": len(both),
        "now": now,
        "reference": best,
        "saved": now - best,
        "percent": 100 * (now - best) / now if now else 0.0,
        "moves": int(ref.loc[both, "moved"].sum()) if len(both) else 0,
    }


def headline_html(head: Mapping[str, Any], assignors: Any) -> str:
    """The page's first lines: cost now, under each assignor, and what switching saves."""
    saved = head["saved"]
    verdict = (
        f"<b>{money(saved)} saved a month</b> ({head['percent']:.0f} %), moving {head['moves']:,} partitions"
        if saved >= 0
        else f"<b>{money(-saved)} more a month</b>: the registered assignors are cheaper"
    )
    lines = [
        '<section id="headline">',
        f'<p class="big">The fleet pays <b>{money(head["now"])}</b> a month for cross-zone reads today '
        f"({head['groups']:,} groups and apps, each with its registered assignor). With rack-optimal "
        f"(Streams: min_traffic) it would pay <b>{money(head['reference'])}</b>: {verdict}.</p>",
    ]
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


def render(directory: str | Path, out: str | Path) -> Path:
    """Write ``index.html`` and its PNGs to ``out``; returns the page's path."""
    dst = Path(out)
    dst.mkdir(parents=True, exist_ok=True)
    loc = load_locality(directory)
    try:
        summary = json.loads(read_text(f"{str(directory).rstrip('/')}/summary.json"))
    except (OSError, ValueError):
        summary = {}
    price = summary.get("settings", {}).get("price_per_gb")
    worst = worst_groups(loc)
    assignors = assignor_totals(loc)
    scenarios = scenario_totals(loc)
    problems = loc[loc["status"] != OK].sort_values(["status", "cluster_id", "group", "scenario", "assignor"])
    problems = problems.assign(status=problems["status"].replace({NOT_APPLICABLE: "not applicable"}))
    not_applicable = problems[problems["status"] == "not applicable"]
    problems = problems[problems["status"] != "not applicable"]
    applies = scenarios[scenarios["applies"] == "yes"] if len(scenarios) else scenarios
    no_scenario = scenarios[scenarios["applies"] != "yes"] if len(scenarios) else scenarios
    images = {
        "clusters": plot_clusters(loc, dst),
        "groups": plot_groups(worst, dst),
        "assignors": plot_assignors(assignors, dst),
        "scenarios": plot_scenarios(scenarios, dst),
    }
    clusters = sorted(loc["cluster_id"].unique())
    groups = loc[["cluster_id", "kind", "group"]].drop_duplicates().shape[0]
    statuses = ", ".join(f"{k}: {v:,}" for k, v in sorted(loc["status"].value_counts().items()))
    price_note = f"{price} USD per GB crossing zones" if price is not None else "the job's price per GB"
    scenario_columns = ["scenario", "applies", "groups", "not_applicable", "cross_rack_registered", "cross_rack_reference", "cost_baseline_usd_month", "cost_registered_usd_month", "cost_reference_usd_month", "moves_registered", "moves_reference", "offline_partitions"]  # fmt: skip
    problem_columns = ["cluster_id", "group", "scenario", "assignor", "status", "detail"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>rackplan fleet report</title>',
        f"<style>{_CSS}</style></head><body>",
        "<h1>rackplan fleet report</h1>",
        headline_html(headline(loc), assignors) + "\n" + floor_html(floor_totals(loc)),
        f'<p id="summary">{len(clusters):,} clusters, {groups:,} groups and apps, '
        f"{len(scenarios):,} scenarios; units {html.escape(statuses)}. Costs: {html.escape(price_note)}, "
        "730 hours a month, consumer reads only.</p>",
        '<h2 id="worst">Worst groups first</h2>',
        f'<img src="{images["groups"]}" alt="monthly cross-zone cost of the most expensive groups">',
        table(
            worst,
            ["cluster_id", "kind", "group", "assignor", "fetch_mode", "pairs", "cross", "cost", "assignment_can_help", "fixable_cost", "unfixable_cost", "cross_ref", "cost_ref", "saved", "moved_ref"],
            WORST_GROUPS,
            "worst",
        ),
        '<h2 id="clusters">Locality per cluster</h2>',
        f'<img src="{images["clusters"]}" alt="cross-rack fraction per cluster">',
        '<h2 id="assignors">Cost saved per assignor</h2>',
        f'<img src="{images["assignors"]}" alt="monthly cost per assignor">',
        table(
            assignors,
            ["kind", "assignor", "groups", "cross_rack", "pairs", "cost_usd_month", "cost_nearest_usd_month", "cost_leader_usd_month", "saved_vs_registered_usd_month", "moves_needed"],
        ),
        '<h2 id="scenarios">Scenario impact</h2>',
        f'<img src="{images["scenarios"]}" alt="cost and moves per scenario">',
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
