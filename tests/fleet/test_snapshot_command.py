"""``rackplan snapshot`` on the command line, against the librdkafka mock cluster: where it writes, and the
bad options and traffic files it refuses (exit 2, one line naming the option; nothing written first)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rackplan.cli import main
from rackplan.fleet.storage import check_inputs
from tests.embedded import embedded_cluster


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The agent's settings file of a running mock cluster with a topic ``orders`` of 6 partitions."""
    with embedded_cluster() as cluster:
        cluster.create_topic("orders", 6, 2)
        path = tmp_path_factory.mktemp("snap") / "agent.yaml"
        path.write_text(
            f'kafka: {{bootstrap_servers: "{cluster.bootstrap_servers}"}}\n'
            "consumer_groups:\n"
            "  - {group_id: pay, members: [{member_id: m, rack: az-a, topics: [orders]}]}\n"
        )
        yield path


def snapshot(config: Path, *args: str) -> int:
    return main(["snapshot", "--config", str(config), "--cluster-id", "mock", *args])


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The command's stderr, which must be exactly one error line; stdout must be empty (nothing written)."""
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rackplan: error: "), err
    return lines[0]


def test_a_trailing_slash_is_a_folder_made_for_the_snapshot(config: Path, tmp_path: Path) -> None:
    """``--out snapshots/`` (not there yet) is the folder the documented next step reads."""
    assert snapshot(config, "--out", f"{tmp_path}/snapshots/") == 0
    written = tmp_path / "snapshots" / "mock.json"
    assert json.loads(written.read_text())["cluster_id"] == "mock"
    assert check_inputs([f"{tmp_path}/snapshots/"]) == [str(written)]  # what `fleet --snapshots` reads


def test_a_file_path_gets_its_missing_folders(config: Path, tmp_path: Path) -> None:
    assert snapshot(config, "--out", str(tmp_path / "no" / "such" / "x.json")) == 0
    assert json.loads((tmp_path / "no" / "such" / "x.json").read_text())["cluster_id"] == "mock"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--out", "-", "--archive", "{afile}"], "--archive {afile}: a file, not a folder"),
        (
            ["--out", "-", "--archive", "{afile}/sub"],
            "--archive {afile}/sub: {afile} is a file, not a folder",
        ),
        (["--out", "{afile}/x.json"], "--out {afile}/x.json: {afile} is a file, not a folder"),
        (["--out", "{afile}/"], "--out {afile}/: a file, not a folder"),
    ],
)
def test_a_file_where_a_folder_must_be_is_refused_before_any_work(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], named: str
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert snapshot(config, *(a.format(afile=afile) for a in args)) == 2
    assert one_error_line(capsys) == f"rackplan: error: {named.format(afile=afile)}"
    assert afile.read_text() == "x"


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--sample-seconds", "-1"),
        ("--sample-seconds", "nan"),
        ("--sample-seconds", "inf"),
        ("--sample-seconds", "1e300"),
        ("--record-bytes", "-1024"),
        ("--record-bytes", "0"),
        ("--record-bytes", "nan"),
        ("--record-bytes", "inf"),
    ],
)
def test_sampling_options_out_of_range_are_refused_naming_the_option(
    config: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    sample = [] if option == "--sample-seconds" else ["--sample-seconds", "0.1"]
    assert snapshot(config, "--out", "-", *sample, option, value) == 2
    assert one_error_line(capsys).startswith(f"rackplan: error: {option}: must be ")


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"orders: [1, 2\n", ", line 2, column 1: invalid YAML: "),
        (b"\xff\xfe", ": not UTF-8 text (byte 0)"),
        (b'{"orders": ' + b"9" * 400 + b"}", ": orders: must be a finite number >= 0"),
        (b"orders: [1, -2, 3, 4, 5, 6]\n", ": orders[1]: must be null or a finite number >= 0"),
        (b"orders: [1, 2]\n", ": orders: expected 6 partitions, got 2"),
        (b"- orders\n", ": the traffic file must hold a mapping, got list"),
    ],
    ids=["syntax", "binary", "400-digit-integer", "negative", "count", "not-a-mapping"],
)
def test_bad_traffic_files_are_refused_naming_the_option_the_file_and_the_field(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, said: str
) -> None:
    traffic = tmp_path / "traffic.yaml"
    traffic.write_bytes(content)
    assert snapshot(config, "--out", "-", "--traffic", str(traffic)) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"rackplan: error: --traffic: {traffic}{said}"), line
