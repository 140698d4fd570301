"""What the fleet reads: a bad document is an ``invalid`` row, never a crash; the newest snapshot is the
newest instant; the unit count announced is the count planned; bad settings and scenarios are one line;
the same input gives the same bytes."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rackplan.fleet import units
from rackplan.fleet.scenarios import parse_scenarios
from rackplan.fleet.settings import FleetOptions
from rackplan.fleet.synthetic import cluster_document

pytest.importorskip("pyarrow", reason="the fleet tables are written with pyarrow")

SCENARIOS = [{"name": "lose-az-a", "kind": "lose_rack", "rack": "az-a"}]
Doc = dict[str, Any]


def _set(path: tuple[Any, ...], value: Any) -> Callable[[Doc], Doc]:
    def mutate(doc: Doc) -> Doc:
        at: Any = doc
        for p in path[:-1]:
            at = at[p]
        at[path[-1]] = value
        return doc

    return mutate


def _traffic(value: Callable[[int], Any]) -> Callable[[Doc], Doc]:
    def mutate(doc: Doc) -> Doc:
        doc["traffic"] = {t: value(len(parts)) for t, parts in doc["topics"].items()}
        return doc

    return mutate


#: (what is wrong, the mutation, whether the whole document is refused, a word of the detail)
BAD_GROUPS = [
    ("members: 5", _set(("consumer_groups", 0, "members"), 5), "members"),
    ("subtopologies: 5", _set(("streams_apps", 0, "subtopologies"), 5), "subtopologies"),
    ("clients: 5", _set(("streams_apps", 0, "clients"), 5), "clients"),
]
BAD_DOCUMENTS = [
    # the reader's message, or the OverflowError it raised: either way a refusal, not a crash
    ("a 400-digit traffic total", _traffic(lambda n: 10**400), "traffic|OverflowError"),
    ("400-digit traffic per partition", _traffic(lambda n: [10**400] * n), "traffic|OverflowError"),
    ("a lone surrogate in a group id", _set(("consumer_groups", 0, "group_id"), "g\ud800"), "Unicode"),
    ("a lone surrogate in the cluster id", _set(("cluster_id",), "c\udfff"), "Unicode"),
    ("schema: true", _set(("schema",), True), "schema"),
    ("taken_at: yesterday", _set(("taken_at",), "yesterday"), "taken_at"),
]


def _snapshots(tmp_path: Path, bad: bytes) -> Path:
    snaps = tmp_path / "snapshots"
    snaps.mkdir()
    (snaps / "good.json").write_text(json.dumps(cluster_document(0, 3, seed=1, streams_apps=1)))
    (snaps / "bad.json").write_bytes(bad)
    return snaps


def _run(snaps: Path, out: Path, options: FleetOptions | None = None) -> tuple[Any, list[dict[str, Any]]]:
    """``run_local`` with its progress events: (summary, the events)."""
    from rackplan.fleet.local import run_local
    from rackplan.fleet.progress import Progress

    log: list[dict[str, Any]] = []
    progress = Progress(0, log=lambda event, **f: log.append({"event": event, **f}))
    summary = run_local([str(snaps)], parse_scenarios(SCENARIOS), out, options or FleetOptions(), progress)
    return summary, log


def _locality(out: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    rows: list[dict[str, Any]] = []
    for f in sorted((out / "locality").rglob("*.parquet")):
        rows += [{**r, "folder": f.parent.parent.name} for r in pq.ParquetFile(f).read().to_pylist()]
    return rows


def _announced(log: list[dict[str, Any]]) -> int:
    return int(
        next(e["total_units"] for e in log if e["event"] == "fleet.phase" and e["phase"] == "planning")
    )


@pytest.mark.parametrize(("what", "mutate", "word"), BAD_GROUPS, ids=[b[0] for b in BAD_GROUPS])
def test_a_registration_that_breaks_the_contract_is_invalid_not_a_crash(
    tmp_path: Path, what: str, mutate: Callable[[Doc], Doc], word: str
) -> None:
    doc = mutate(copy.deepcopy(cluster_document(1, 3, seed=2, streams_apps=1)))
    summary, log = _run(_snapshots(tmp_path, json.dumps(doc).encode()), tmp_path / "out")
    rows = _locality(tmp_path / "out")
    bad = [r for r in rows if r["status"] == units.INVALID]
    assert units.FAILED not in summary.statuses and bad and summary.statuses[units.OK] > 0
    assert all(word in r["detail"] and r["folder"] == "cluster_id=cluster-01" for r in bad), bad[0]
    assert len({r["group"] for r in bad}) == 1  # that group alone, each of its units
    assert _announced(log) == summary.units == len(rows)


@pytest.mark.parametrize(("what", "mutate", "word"), BAD_DOCUMENTS, ids=[b[0] for b in BAD_DOCUMENTS])
def test_a_document_that_breaks_the_format_is_one_invalid_row_under_its_file(
    tmp_path: Path, what: str, mutate: Callable[[Doc], Doc], word: str
) -> None:
    doc = mutate(copy.deepcopy(cluster_document(1, 3, seed=2, streams_apps=1)))
    summary, log = _run(_snapshots(tmp_path, json.dumps(doc).encode()), tmp_path / "out")
    bad = [r for r in _locality(tmp_path / "out") if r["status"] != units.OK]
    assert [(r["status"], r["kind"], r["taken_at"]) for r in bad] == [(units.INVALID, "snapshot", None)]
    assert any(w in bad[0]["detail"] for w in word.split("|")), bad[0]["detail"]
    assert "bad.json" in bad[0]["folder"]
    assert summary.statuses[units.INVALID] == 1 and _announced(log) == summary.units


@pytest.mark.parametrize(
    "text",
    [
        b'{"schema": 1, "cluster_id": "X", "cluster_id": "Y", "taken_at": "2026-11-21T22:00:00Z"}',
        b"\xff\xfe not UTF-8",
        b'{"schema": 1, "cluster_id": "c\xff", "taken_at": "2026-11-21T22:00:00Z", "brokers": [], '
        b'"topics": {}}',
    ],
    ids=["a duplicate key", "bytes that are not UTF-8", "a string that is not UTF-8"],
)
def test_duplicate_keys_and_bytes_that_are_not_utf8_are_invalid(tmp_path: Path, text: bytes) -> None:
    from rackplan.fleet.documents import listing, read_local

    summary, log = _run(_snapshots(tmp_path, text), tmp_path / "out")
    assert summary.statuses[units.INVALID] == 1 and _announced(log) == summary.units
    (record,) = read_local([str(tmp_path / "snapshots" / "bad.json")])
    assert listing(record["value"], record["source"])["cluster_id"] is None  # counted as one bad unit
    assert record["digest"] == hashlib.sha256(text).hexdigest()  # the file's bytes, as Spark's sha2


def test_a_nul_in_a_cluster_id_is_escaped_in_its_folder(tmp_path: Path) -> None:
    doc = cluster_document(1, 2, seed=2)
    doc["cluster_id"] = "a\x00b"
    summary, _ = _run(_snapshots(tmp_path, json.dumps(doc).encode()), tmp_path / "out")
    assert units.FAILED not in summary.statuses
    assert (tmp_path / "out" / "locality" / "cluster_id=a%00b").is_dir()


def test_the_announced_unit_count_is_exact_with_more_assignors_than_strategies(tmp_path: Path) -> None:
    snaps = _snapshots(tmp_path, b"{not json")
    (snaps / "apps.json").write_text(json.dumps(cluster_document(2, 2, seed=3, streams_apps=2)))
    options = FleetOptions(
        consumer_assignors=("range", "cooperative-sticky", "rack-optimal", "rack-optimal+bytes")
    )
    summary, log = _run(snaps, tmp_path / "out", options)
    final = [e for e in log if e["event"] == "fleet.progress"][-1]
    assert _announced(log) == final["done"] == summary.units == len(_locality(tmp_path / "out"))
    assert summary.statuses[units.INVALID] == 1


def _row(source: str, taken_at: str | None, digest: str, cluster: str | None = "c") -> dict[str, Any]:
    return {
        "source": source,
        "cluster_id": cluster,
        "taken_at": taken_at,
        "groups": 1,
        "apps": 0,
        "digest": digest,
    }


def test_the_newest_snapshot_is_the_newest_instant_not_the_longest_string() -> None:
    from rackplan.fleet.documents import choose_documents

    for older, newer in (
        ("2026-11-21T22:30:00+01:00", "2026-11-21T22:00:00Z"),  # 21:30Z, then 22:00Z
        ("2026-11-21T22:00:00Z", "2026-11-21T22:00:00.500Z"),
        ("2026-11-22T01:00:00+05:00", "2026-11-21T22:00:00Z"),  # 20:00Z, then 22:00Z
    ):
        rows = [_row("a", older, "d-old"), _row("b", newer, "d-new")]
        assert choose_documents(rows, "latest").keep == frozenset({"d-new"}), (older, newer)
        assert choose_documents(rows[::-1], "latest").keep == frozenset({"d-new"})
    # the same instant written two ways is one snapshot: one of them is kept
    same = [_row("a", "2026-11-22T03:00:00+05:00", "d1"), _row("b", "2026-11-21T22:00:00Z", "d2")]
    assert len(choose_documents(same, "all").keep or ()) == 1


def test_a_taken_at_that_is_not_a_time_makes_the_document_invalid(tmp_path: Path) -> None:
    from rackplan.fleet.documents import listing

    doc = cluster_document(0, 2, seed=1)
    lines = [json.dumps({**doc, "taken_at": "yesterday"}), json.dumps(doc)]
    assert (
        listing(lines[0], "x")["cluster_id"] is None and listing(lines[1], "x")["cluster_id"] == "cluster-00"
    )
    snaps = tmp_path / "s"
    snaps.mkdir()
    (snaps / "a.jsonl").write_text("\n".join(lines) + "\n\t\n \t \n")  # blank lines: tabs and spaces
    summary, _ = _run(snaps, tmp_path / "out")
    rows = _locality(tmp_path / "out")
    assert summary.statuses[units.INVALID] == 1 and summary.documents == 2
    assert {r["taken_at"] for r in rows if r["status"] == units.OK} != {None}


def test_a_blank_line_of_tabs_is_no_document(tmp_path: Path) -> None:
    from rackplan.fleet.documents import read_local

    (tmp_path / "a.jsonl").write_text('{"a": 1}\n\t\n \t\r\n\n')
    assert [r["value"] for r in read_local([str(tmp_path / "a.jsonl")])] == ['{"a": 1}']


def test_the_source_of_a_file_is_spelled_as_hadoop_spells_it(tmp_path: Path) -> None:
    from rackplan.fleet.documents import source_uri

    path = tmp_path / "bad é+(1)!,x y%.json"
    path.write_text("{")
    base = str(tmp_path.resolve())
    assert source_uri(path) == f"file:{base}/bad%20é+(1)!,x%20y%25.json"  # java.net.URI: é as is, a space %20


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from rackplan.cli import main

    rc = main(args)
    return rc, capsys.readouterr().err


def test_a_corrupt_parquet_file_is_a_bad_snapshot_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "x.parquet").write_bytes(b"PAR1 not really")
    rc, err = _cli(
        ["fleet", "--snapshots", str(tmp_path / "s"), "--out", str(tmp_path / "o"), "--progress", "0"], capsys
    )
    lines = [line for line in err.splitlines() if not line.startswith("{")]
    assert rc == 2 and len(lines) == 1 and "x.parquet" in lines[0] and "Parquet" in lines[0], err


BAD_INPUTS = [
    ("scenarios", "- {name: x, kind: lose_rack, rack: [az-a\n", [], ["--scenarios", "line 2"]),
    ("scenarios", "- {name: x, kind: lose_rack, rack: 5}\n", [], ["--scenarios", "rack"]),
    ("scenarios", "- {name: x, kind: teleport}\n", [], ["--scenarios", "teleport"]),
    ("scenarios", "- {name: x, kind: shift_members, fraction: .nan, to_rack: a}\n", [], ["fraction"]),
    ("scenarios", b"\xff\xfe", [], ["--scenarios", "UTF-8"]),
    ("settings", "fleet: {price_per_gb: -1}\n", [], ["fleet.price_per_gb"]),
    ("settings", "fleet: {history: sometimes}\n", [], ["fleet.history"]),
    ("settings", "fleet: {price_per_gb: .inf}\n", [], ["fleet.price_per_gb", "finite"]),
    (None, "", ["--price-per-gb", "-1"], ["command line", "fleet.price_per_gb"]),
    (None, "", ["--price-per-gb", "inf"], ["command line", "fleet.price_per_gb", "finite"]),
    (None, "", ["--progress", "inf"], ["fleet.progress_interval_s", "finite"]),
    (None, "", ["--progress", "1e300"], ["fleet.progress_interval_s"]),
]


@pytest.mark.parametrize(("kind", "text", "flags", "words"), BAD_INPUTS)
def test_bad_settings_and_scenarios_are_one_line_naming_them(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    kind: str | None,
    text: str | bytes,
    flags: list[str],
    words: list[str],
) -> None:
    snap = tmp_path / "c.json"
    snap.write_text(json.dumps(cluster_document(0, 1, seed=1)))
    args = ["fleet", "--snapshots", str(snap), "--out", str(tmp_path / "o"), *flags]
    if kind is not None:
        path = tmp_path / f"{kind}.yaml"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        args += [f"--{kind}", str(path)]
        words = [*words, str(path)]
    rc, err = _cli(args, capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert all(w in err for w in words), err
    assert not (tmp_path / "o").exists()


def test_a_non_finite_price_from_the_environment_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RACKPLAN_FLEET__PRICE_PER_GB", "Infinity")
    snap = tmp_path / "c.json"
    snap.write_text(json.dumps(cluster_document(0, 1, seed=1)))
    rc, err = _cli(["fleet", "--snapshots", str(snap), "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and "RACKPLAN_FLEET__PRICE_PER_GB" in err and len(err.strip().splitlines()) == 1


def test_without_unit_timings_two_runs_write_the_same_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snaps = _snapshots(tmp_path, b"{broken")
    settings = tmp_path / "fleet.yaml"
    settings.write_text("fleet: {unit_timings: false}\n")
    files: list[dict[str, bytes]] = []
    for name in ("a", "b"):
        out = tmp_path / name
        args = ["fleet", "--snapshots", str(snaps), "--settings", str(settings), "--out", str(out)]
        rc, _ = _cli([*args, "--engine", "local", "--progress", "0"], capsys)
        assert rc == 0
        files.append({str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    a, b = files
    assert sorted(a) == sorted(b) and len(a) > 4
    assert {k: v for k, v in a.items() if k != "summary.json"} == {
        k: v for k, v in b.items() if k != "summary.json"
    }
    run_ids = [json.loads(f["summary.json"])["run_id"] for f in files]
    assert run_ids[0] == run_ids[1] and run_ids[0].startswith("input-")
