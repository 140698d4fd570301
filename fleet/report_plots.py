"""The report's four PNG plots (matplotlib, Agg backend: no display, same tables, same bytes).

Kept apart from :mod:`.report` (which reads the tables and decides what the page
says): each plot is drawn only when it has something to show, so a run where
no unit was evaluated gets a page without plots, not an empty canvas.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .report_html import money
from .scenarios import BASELINE
from .units import OK

#: the page's plots, by the section that shows them
PNG = {
    "groups": "locality_groups.png",
    "clusters": "locality_clusters.png",
    "assignors": "cost_saved.png",
    "scenarios": "scenario_impact.png",
}

#: longest tick label on a plot; longer names are elided in the middle (the tables keep them whole)
LABEL_CHARS = 36


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
    return _save(fig, out / PNG["clusters"])


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
    return _save(fig, out / PNG["groups"])


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
    return _save(fig, out / PNG["assignors"])


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
    return _save(fig, out / PNG["scenarios"])


def plots(loc: Any, worst: Any, assignors: Any, scenarios: Any, out: Path) -> dict[str, str | None]:
    """The page's plots (file names in ``out``), each only when it has something to show (None: no
    plot, and no stale file of an earlier page left under its name)."""
    evaluated = bool(((loc["status"] == OK) & (loc["scenario"] == BASELINE)).any())
    applies = bool(len(scenarios)) and bool((scenarios["applies"] == "yes").any())
    drawn = {
        "groups": plot_groups(worst, out) if len(worst) else None,
        "clusters": plot_clusters(loc, out) if evaluated else None,
        "assignors": plot_assignors(assignors, out) if len(assignors) else None,
        "scenarios": plot_scenarios(scenarios, out) if applies else None,
    }
    for key, name in drawn.items():
        if name is None:
            (out / PNG[key]).unlink(missing_ok=True)
    return drawn
