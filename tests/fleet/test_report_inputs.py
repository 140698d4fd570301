"""``rackplan report`` on the tables it must still read: no unit evaluated, URIs, history, small amounts.

The tables are written here without Spark (the job's own unit functions, as in
``test_report.py``); the command runs in process through ``rackplan.cli.main``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pd = pytest.importorskip("pandas", reason="the report needs the spark extra (pandas, pyarrow, matplotlib)")
pytest.importorskip("pyarrow", reason="the report needs the spark extra (pyarrow)")
pytest.importorskip("matplotlib", reason="the report needs the spark extra (matplotlib)")

from rackplan.cli import main  # noqa: E402
from rackplan.fleet.report import load_locality, render  # noqa: E402
from rackplan.fleet.synthetic import cluster_document  # noqa: E402
from tests.fleet.test_report import Page, write_rows, write_tables  # noqa: E402


def page_text(site: Path) -> str:
    return (site / "index.html").read_text(encoding="utf-8")


def same_bytes(a: Path, b: Path) -> None:
    assert sorted(f.name for f in a.iterdir()) == sorted(f.name for f in b.iterdir())
    for f in sorted(a.iterdir()):
        assert (b / f.name).read_bytes() == f.read_bytes(), f.name


def test_tables_of_no_unit_render_a_page_without_plots(tmp_path: Path) -> None:
    """Every snapshot read had no group: the job writes a locality folder with no file (no columns)."""
    (tmp_path / "tables" / "locality").mkdir(parents=True)
    (tmp_path / "tables" / "summary.json").write_text(json.dumps({"settings": {"price_per_gb": 0.02}}))
    assert main(["report", "--in", str(tmp_path / "tables"), "--out", str(tmp_path / "site")]) == 0
    text = page_text(tmp_path / "site")
    assert "The tables hold no unit" in text and "<img" not in text
    assert [f.name for f in (tmp_path / "site").iterdir()] == ["index.html"]
    render(tmp_path / "tables", tmp_path / "again")
    same_bytes(tmp_path / "site", tmp_path / "again")


@pytest.mark.parametrize("typed", [False, True], ids=["text-taken_at", "timestamp-taken_at"])
def test_tables_where_every_unit_is_invalid_list_them_with_the_reason(tmp_path: Path, typed: bool) -> None:
    bad_leader = cluster_document(0, 2, seed=5)
    topic = sorted(bad_leader["topics"])[0]
    bad_leader["leaders"][topic][0] = 99  # a broker the snapshot does not have
    write_rows(
        tmp_path / "tables",
        [("broken.json", "{"), ("leaders.json", json.dumps(bad_leader))],
        typed=typed,
    )
    stale = tmp_path / "site" / "cost_saved.png"  # a plot of an earlier page in the same folder
    stale.parent.mkdir()
    stale.write_bytes(b"old")
    assert main(["report", "--in", str(tmp_path / "tables"), "--out", str(tmp_path / "site")]) == 0
    text = page_text(tmp_path / "site")
    assert "<img" not in text and "No group was evaluated" in text
    assert [f.name for f in (tmp_path / "site").iterdir()] == ["index.html"]
    page = Page()
    page.feed(text)
    problems = page.tables[-1]
    cols = problems[0]
    listed = {r[cols.index("cluster id")]: r[cols.index("detail")] for r in problems[1:]}
    assert set(listed) == {"broken.json", "leaders.json"}
    assert f"leaders.{topic}[0]: unknown broker id 99" in listed["leaders.json"]
    assert all(r[cols.index("status")] == "invalid" for r in problems[1:])
    render(tmp_path / "tables", tmp_path / "again")
    same_bytes(tmp_path / "site", tmp_path / "again")


def test_in_and_out_as_file_uris(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_tables(tmp_path / "tables")
    monkeypatch.chdir(tmp_path)  # a URI read as a relative path would land here (file:/...)
    site = tmp_path / "site"
    assert main(["report", "--in", (tmp_path / "tables").as_uri(), "--out", site.as_uri()]) == 0
    assert "cluster-01" in page_text(site) and (site / "cost_saved.png").stat().st_size > 0
    assert not (tmp_path / "file:").exists()


def test_other_uris_stay_uris_never_a_local_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``s3://my-bucket/tables`` is read from the bucket (a fake S3: a folder behind pyarrow's file-system
    API, no network), not from a local folder ``s3:/my-bucket/tables``; the page is written to the bucket."""
    from pyarrow import fs as pafs  # type: ignore[import-untyped,import-not-found,unused-ignore]

    from rackplan.fleet import report, storage

    bucket = tmp_path / "s3-service"
    write_tables(bucket / "my-bucket" / "tables")
    write_rows(tmp_path / "s3:" / "my-bucket" / "tables", [("decoy.json", "{")])  # what Path() would read
    monkeypatch.chdir(tmp_path)
    real = storage.filesystem

    def fake(uri: str) -> tuple[Any, str]:
        if uri.startswith("s3://"):
            return pafs.SubTreeFileSystem(str(bucket), pafs.LocalFileSystem()), uri.removeprefix("s3://")
        return real(uri)

    monkeypatch.setattr(storage, "filesystem", fake)
    monkeypatch.setattr(report, "filesystem", fake)
    assert main(["report", "--in", "s3://my-bucket/tables", "--out", "s3://my-bucket/site"]) == 0
    assert "s3://my-bucket/site/index.html" in capsys.readouterr().err
    site = bucket / "my-bucket" / "site"
    text = page_text(site)
    assert "cluster-00" in text and "decoy.json" not in text
    assert sorted(f.name for f in site.iterdir()) == [
        "cost_saved.png",
        "index.html",
        "locality_clusters.png",
        "locality_groups.png",
        "scenario_impact.png",
    ]
    assert not (tmp_path / "s3:" / "my-bucket" / "site").exists()


def test_an_unreadable_uri_is_bad_input_naming_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["report", "--in", "nosuchscheme://x/tables", "--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rackplan: error: --in nosuchscheme://x/tables: ") and "\n" not in err


@pytest.mark.parametrize("typed", [False, True], ids=["text-taken_at", "timestamp-taken_at"])
def test_the_newest_snapshot_of_a_cluster_wins_compared_as_times(tmp_path: Path, typed: bool) -> None:
    """``fleet --history all``: of one cluster's snapshots, the report keeps the newest, as a time:
    not rows without a time (null, or text that sorts above digits, as runs that took any text wrote),
    not a snapshot whose text sorts higher."""
    doc = cluster_document(0, 2, seed=5)
    newest = "2026-11-21T22:00:00Z"
    versions = [newest, "2026-11-22T01:00:00+05:00"]  # the second is 20:00 UTC: older
    texts = [(f"v{i}.json", json.dumps({**doc, "taken_at": t})) for i, t in enumerate(versions)]
    part = tmp_path / "tables" / "locality" / "part-0.parquet"
    frame = write_rows(tmp_path / "tables", texts, typed=typed)
    timeless = frame[frame["taken_at"].astype("string") == frame["taken_at"].astype("string").iloc[0]].copy()
    # no time: null in a timestamp column (NaT, of the column's type), text that is no time in a text one
    timeless["taken_at"] = timeless["taken_at"].where(timeless["kind"] == "") if typed else "yesterday"
    pd.concat([frame, timeless], ignore_index=True).to_parquet(part)
    loc = load_locality(tmp_path / "tables")
    kept = pd.to_datetime(loc["taken_at"].astype("string"), utc=True, errors="coerce", format="ISO8601")
    assert list(kept.unique()) == [pd.Timestamp(newest)]
    assert len(loc) == len(frame) // 2 and len(loc) > 0


def test_money_is_rounded_before_it_is_written() -> None:
    """No ``$1.00`` (0.996 rounds to a dollar), no ``$0.00`` (under half a cent), no ``-$0``."""
    from rackplan.fleet.report_html import money, table

    got = [money(v) for v in (0.996, 0.0005, -0.0004, 0.994, 0.42, -0.996, 1234.4, 0.0)]
    assert got == ["$1", "$0", "$0", "$0.99", "$0.42", "-$1", "$1,234", "$0"]
    html = table(pd.DataFrame({"cost": [0.996, 0.0005]}), ["cost"])
    assert ">$1<" in html and ">$0<" in html and ".00" not in html


def test_summary_counts_clusters_and_groups_not_bad_snapshot_files(tmp_path: Path) -> None:
    frame = write_tables(tmp_path / "tables")
    render(tmp_path / "tables", tmp_path / "site")
    text = page_text(tmp_path / "site")
    summary = text[text.index('<p id="summary">') : text.index("</p>", text.index('<p id="summary">'))]
    read = frame[frame["kind"] != "snapshot"]
    groups = read[["cluster_id", "kind", "group"]].drop_duplicates().shape[0]
    assert read["cluster_id"].nunique() == 2 and groups > 2
    assert summary.startswith(f'<p id="summary">2 clusters, {groups:,} groups and apps, ')
    assert "1 snapshot invalid" in summary
