"""``rackplan report``: a static page with PNG plots, worst groups first, rendered by a real browser.

The locality table is produced here without Spark (the same pure functions
the job runs), so these tests need pandas, pyarrow and matplotlib only.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

pd = pytest.importorskip("pandas", reason="the report needs the spark extra (pandas, pyarrow, matplotlib)")
pytest.importorskip("pyarrow", reason="the report needs the spark extra (pyarrow)")
pytest.importorskip("matplotlib", reason="the report needs the spark extra (matplotlib)")

from rackplan.fleet import units  # noqa: E402
from rackplan.fleet.report import render  # noqa: E402
from rackplan.fleet.scenarios import parse_scenarios  # noqa: E402
from rackplan.fleet.synthetic import cluster_document  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
SCENARIOS = [
    {"name": "lose-az-a", "kind": "lose_rack", "rack": "az-a"},
    {"name": "shift-to-b", "kind": "shift_members", "fraction": 0.5, "to_rack": "az-b"},
    {"name": "no-match", "kind": "raise_rf", "topic": "zzz*", "replication_factor": 3},
]


def write_tables(out: Path) -> Any:
    """The locality table of a small fleet (one bad snapshot among them), as the job writes it."""
    texts = [json.dumps(cluster_document(i, 6, seed=5, streams_apps=1)) for i in range(2)]
    long_name = json.loads(texts[0])
    long_name["consumer_groups"][0]["group_id"] = "payments-" + "x" * 150  # a very long label
    texts[0] = json.dumps(long_name)
    return write_rows(out, [*((f"c{i}.json", t) for i, t in enumerate(texts)), ("broken.json", "{")])


def write_rows(out: Path, documents: list[tuple[str, str]], typed: bool = False) -> Any:
    """The locality table of ``documents`` (source, text) evaluated by the job's own functions;
    ``typed``: ``taken_at`` a UTC timestamp (schema 2, null where it does not parse), else text."""
    rows: list[dict[str, Any]] = []
    scenarios = parse_scenarios(SCENARIOS)
    for source, text in documents:
        for g in units.group_rows(text, source):
            rows.extend(units.evaluate(u) for u in units.unit_rows(g, scenarios))
    dtypes = {"string": "string", "boolean": "boolean", "long": "Int64", "double": "Float64"}
    frame = pd.DataFrame.from_records(rows, columns=[c for c, _ in units.RESULT_COLUMNS])
    frame = frame.astype({c: dtypes[k] for c, k in units.RESULT_COLUMNS})
    if typed:
        frame["taken_at"] = pd.to_datetime(frame["taken_at"], utc=True, errors="coerce", format="ISO8601")
    (out / "locality").mkdir(parents=True)
    frame.to_parquet(out / "locality" / "part-0.parquet")
    (out / "summary.json").write_text(json.dumps({"settings": {"price_per_gb": 0.02}}))
    return frame


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.images: list[str] = []
        self.tables: list[list[list[str]]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(str(a["id"]))
        if tag == "img":
            self.images.append(str(a["src"]))
        elif tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[-1].append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    base = tmp_path_factory.mktemp("fleet")
    frame = write_tables(base / "tables")
    render(base / "tables", base / "site")
    return base, frame


def test_page_structure_and_plots(report: tuple[Path, Any]) -> None:
    import matplotlib.image

    base, _ = report
    page = Page()
    page.feed((base / "site" / "index.html").read_text(encoding="utf-8"))
    assert {"summary", "worst", "clusters", "assignors", "scenarios", "problems"} <= set(page.ids)
    assert page.images == [
        "locality_groups.png",
        "locality_clusters.png",
        "cost_saved.png",
        "scenario_impact.png",
    ]
    for name in page.images:
        pixels = matplotlib.image.imread(base / "site" / name)  # decodes, or raises
        assert pixels.shape[0] > 200 and pixels.shape[1] > 400
        assert pixels[..., :3].std() > 0.05  # not a blank canvas


def test_worst_groups_come_first(report: tuple[Path, Any]) -> None:
    base, frame = report
    page = Page()
    page.feed((base / "site" / "index.html").read_text(encoding="utf-8"))
    worst = next(t for t in page.tables if "cost ref" in t[0])
    header, body = worst[0], worst[1:]
    cost = [
        float(r[header.index("cost")].replace(",", "").lstrip("$")) for r in body
    ]  # headers show spaces for _
    assert cost == sorted(cost, reverse=True) and cost[0] > 0
    # The first row is the registered baseline unit with the highest cost in its own fetch mode.
    reg = frame[(frame["status"] == "ok") & (frame["scenario"] == "baseline") & frame["registered"]]
    own = reg["cost_leader_usd_month"].where(reg["fetch_mode"] == "leader", reg["cost_nearest_usd_month"])
    top = reg.loc[own.astype(float).idxmax()]
    assert (
        body[0][header.index("group")] == top["group"]
        and body[0][header.index("cluster id")] == top["cluster_id"]
    )
    # The broken snapshot is listed, not hidden.
    problems = next(t for t in page.tables if t[0][:2] == ["cluster id", "group"] and "invalid" in str(t))
    cols = problems[0]
    assert any(
        r[cols.index("cluster id")] == "broken.json" and r[cols.index("status")] == "invalid"
        for r in problems[1:]
    )


def test_same_tables_same_page(report: tuple[Path, Any], tmp_path: Path) -> None:
    base, _ = report
    render(base / "tables", tmp_path)
    for f in sorted((base / "site").iterdir()):
        assert (tmp_path / f.name).read_bytes() == f.read_bytes(), f.name


@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="headless Chromium not installed (apt-get install chromium)"
)
def test_renders_in_headless_chromium(report: tuple[Path, Any], tmp_path: Path) -> None:
    """Every plot loads and decodes in a real browser; the page has its tables."""
    base, _ = report
    site = tmp_path / "site"
    shutil.copytree(base / "site", site)
    page = site / "index.html"
    probe = (
        "<script>window.addEventListener('load', () => {"
        "const ok = [...document.images].filter(i => i.complete && i.naturalWidth > 0).length;"
        "document.body.setAttribute('data-probe', ok + '/' + document.images.length + '/' +"
        " document.querySelectorAll('table tbody tr').length);});</script></body>"
    )
    page.write_text(page.read_text(encoding="utf-8").replace("</body>", probe), encoding="utf-8")
    out = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
         "--virtual-time-budget=10000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    dom = Page()
    dom.feed(out.stdout)
    marker = out.stdout.split('data-probe="', 1)[1].split('"', 1)[0]
    loaded, total, rows = (int(x) for x in marker.split("/"))
    assert (loaded, total) == (4, 4)
    assert rows > 10
    shot = tmp_path / "shot.png"
    subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--window-size=1200,1600", f"--screenshot={shot}", page.as_uri()],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (1600, 1200) and pixels[..., :3].std() > 0.05


def test_worst_groups_plot_shows_the_cost_it_is_ordered_by(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The bars are the groups' monthly cost in USD (the order of the list), not a fraction."""
    from rackplan.fleet import report as rep
    from rackplan.fleet import report_plots

    write_tables(tmp_path / "t")
    loc = rep.load_locality(tmp_path / "t")
    worst = rep.worst_groups(loc)
    figures: list[Any] = []

    def save(fig: Any, path: Path) -> str:
        figures.append(fig)
        return path.name

    monkeypatch.setattr(report_plots, "_save", save)
    report_plots.plot_groups(worst, tmp_path)
    ax = figures[0].axes[0]
    bars = [p.get_width() for p in ax.patches][: len(worst)]
    assert bars == pytest.approx(list(worst["cost"])) and bars == sorted(bars, reverse=True)
    assert "USD" in ax.get_xlabel()
    notes = [t.get_text() for t in ax.texts]
    assert len(notes) == len(worst) and all(n.startswith("\\$") and "/month" in n for n in notes)


def test_long_labels_stay_inside_a_plot_of_bounded_size(report: tuple[Path, Any]) -> None:
    import matplotlib.image

    base, _ = report
    assert "x" * 150 in (base / "site" / "index.html").read_text(encoding="utf-8")  # the table keeps it
    for png in ("locality_groups.png", "scenario_impact.png", "locality_clusters.png", "cost_saved.png"):
        _height, width = matplotlib.image.imread(base / "site" / png).shape[:2]
        assert width <= 1200, (
            png,
            width,
        )  # 10-11 inches at 100 dpi: the label was elided, not the plot widened


def test_scenarios_that_match_nothing_and_lost_partitions_are_said(report: tuple[Path, Any]) -> None:
    from rackplan.fleet import report as rep
    from rackplan.fleet.report_plots import scenario_label

    base, _ = report
    totals = rep.scenario_totals(rep.load_locality(base / "tables")).set_index("scenario")
    assert totals.loc["no-match", "applies"] == "not applicable"
    assert totals.loc["no-match", "groups"] == 0
    lost = totals.loc["lose-az-a"]
    assert lost["offline_partitions"] > 0  # RF-1 partitions on az-a
    label = scenario_label({"scenario": "lose-az-a", **lost.to_dict()})
    assert "OFFLINE" in label and f"{int(lost['offline_partitions']):,}" in label
    assert "(not applicable)" in scenario_label({"scenario": "no-match", **totals.loc["no-match"].to_dict()})
    page = Page()
    page.feed((base / "site" / "index.html").read_text(encoding="utf-8"))
    scen = [t for t in page.tables if t[0][0] == "scenario"]
    row = next(r for t in scen for r in t[1:] if r[0] == "no-match")
    assert row[scen[-1][0].index("applies")] == "not applicable"
    problems = page.tables[-1]
    assert any(r[problems[0].index("status")] == "not applicable" for r in problems[1:])


def test_headline_first_money_as_people_write_it_and_not_applicable_folded(report: tuple[Path, Any]) -> None:
    """The page opens with the fleet's cost now, under the reference and what that saves; money is
    ``-$679``, counts are integers; rows of what does not apply sit in a closed <details>."""
    from rackplan.fleet.report import headline, load_locality
    from rackplan.fleet.report_html import money, number

    assert (money(-679.03), money(1234.4), money(0.0), money(0.42)) == ("-$679", "$1,234", "$0", "$0.42")
    assert (number(12.0), number(1.5), number(3)) == ("12", "1.5", "3")
    base, frame = report
    text = (base / "site" / "index.html").read_text(encoding="utf-8")
    head = headline(load_locality(base / "tables"))
    ok = frame[(frame["status"] == "ok") & (frame["scenario"] == "baseline")]
    own = ok["cost_leader_usd_month"].where(ok["fetch_mode"] == "leader", ok["cost_nearest_usd_month"])
    now, best = float(own[ok["registered"]].sum()), float(own[ok["reference"]].sum())
    assert head["now"] == pytest.approx(now) and head["reference"] == pytest.approx(best) and now > best
    first = text.index('id="headline"')
    assert first < text.index('id="summary"') < text.index('id="worst"')  # before anything else
    top = text[first : text.index("</section>")]
    assert money(now) in top and money(best) in top and f"{money(now - best)} saved a month" in top
    body = text[text.index("<body>") :]
    assert "$-" not in body and ".00<" not in body  # no -$ after the dollar, no 12.00
    opened, closed = body.split("<details>", 1)[0], body.split("<details>", 1)[1]
    assert "<td>not applicable</td>" not in opened  # every not-applicable row is folded away
    assert closed.count("<td>not applicable</td>") >= 1 and "open" not in body.split("<details", 1)[1][:1]


def test_the_page_says_what_assignment_can_fix_and_what_it_cannot(report: tuple[Path, Any]) -> None:
    """Issue 26 §5 in the report: of today's cost (registered assignors, baseline, own fetch mode), the part
    above the floor (partitions cross-rack from every rack of their group) is fixable, the floor is not;
    the paragraph's sums are the locality table's, and each worst group carries its verdict."""
    from rackplan.fleet.assignment_help import FIXABLE, NONE, NOT_FIXABLE, UNKNOWN
    from rackplan.fleet.report_html import money

    base, frame = report
    text = (base / "site" / "index.html").read_text(encoding="utf-8")
    ok = frame[(frame["status"] == "ok") & (frame["scenario"] == "baseline") & frame["registered"]]
    leader = ok["fetch_mode"] == "leader"
    cost = ok["cost_leader_usd_month"].where(leader, ok["cost_nearest_usd_month"]).astype(float)
    floor = ok["unfixable_leader_usd_month"].where(leader, ok["unfixable_nearest_usd_month"]).astype(float)
    assert (floor <= cost + 1e-9).all() and floor.sum() > 0 and (cost - floor).sum() > 0
    para = text[text.index('id="floor"') : text.index("</p>", text.index('id="floor"'))]
    assert text.index('id="headline"') < text.index('id="floor"') < text.index('id="worst"')
    assert f"<b>{money(float((cost - floor).clip(lower=0).sum()))}</b> can be removed" in para
    assert f"<b>{money(float(floor.sum()))}</b> cannot" in para
    page = Page()
    page.feed(text)
    worst = next(t for t in page.tables if t and "assignment can help" in t[0])
    verdicts = {row[worst[0].index("assignment can help")] for row in worst[1:]}
    assert verdicts <= {FIXABLE, NOT_FIXABLE, NONE, UNKNOWN} and FIXABLE in verdicts


def test_verdicts_follow_the_floor() -> None:
    from rackplan.fleet.assignment_help import FIXABLE, NONE, NOT_FIXABLE, UNKNOWN, add_floor

    rows = [  # (cross bytes, floor bytes, pairs with traffic) in nearest-replica mode
        (0.0, 0.0, 3, NONE),
        (5.0, 2.0, 3, FIXABLE),
        (2.0, 2.0, 3, NOT_FIXABLE),
        (0.0, 0.0, 0, UNKNOWN),
    ]
    loc = pd.DataFrame(
        {
            "fetch_mode": ["nearest-replica"] * 4,
            "cost": [c * 2.0 for c, _, _, _ in rows],
            "pairs_with_traffic": [n for _, _, n, _ in rows],
            "cross_bytes_nearest": [c for c, _, _, _ in rows],
            "cross_bytes_leader": [99.0] * 4,
            "unfixable_bytes_nearest": [f for _, f, _, _ in rows],
            "unfixable_bytes_leader": [0.0] * 4,
            "unfixable_nearest_usd_month": [f * 2.0 for _, f, _, _ in rows],
            "unfixable_leader_usd_month": [0.0] * 4,
        }
    )
    add_floor(loc)
    assert list(loc["assignment_can_help"]) == [v for *_, v in rows]
    assert list(loc["fixable_cost"]) == [0.0, 6.0, 0.0, 0.0]
