"""``rackplan assign FILE`` without the parser (:func:`rackplan.cli.plain_assign`), checked against argparse itself.

The plain line skips ``argparse`` for start-up's sake (issue 29), so it must be exactly a line the
parser reads as ``assign INSTANCE`` with every option at its default: Hypothesis draws command lines
from words that trip parsers (options, their abbreviations, ``--``, ``-``, ``=``, ``@``, negative
numbers, empty words) and the parser is the oracle.  Every other line goes to the parser, so its
answers (help, errors, exit 2) cannot change.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rackplan.assignor.cli import MAX_INPUT_MIB
from rackplan.cli import main, plain_assign
from rackplan.parser import build_parser

WORDS = st.sampled_from(
    [
        "assign",
        "agent",
        "x.json",
        "-",
        "--",
        "-h",
        "--help",
        "--max-input-mib",
        "--max-input",
        "--max-input-mib=3",
        "--m=3",
        "3",
        "-1",
        "@args",
        "",
        "=",
        "--version",
        "a b.json",
    ]
)


def _parsed(argv: list[str]) -> tuple[str, int] | None:
    """(instance, max_input_mib) if the assign parser accepts the line as ``assign``, else None."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            args = build_parser(with_agent=False).parse_args(argv)
    except SystemExit:
        return None
    return (args.instance, args.max_input_mib) if args.command == "assign" else None


@settings(max_examples=400, deadline=None)
@given(st.lists(WORDS, max_size=4))
@example(["assign", "-"])
@example(["assign", "x.json"])
@example(["assign", "--", "x.json"])
@example(["assign", "-1"])
def test_a_plain_line_is_one_the_parser_reads_as_assign_with_its_defaults(argv: list[str]) -> None:
    instance = plain_assign(argv)
    if instance is not None:
        assert _parsed(argv) == (instance, MAX_INPUT_MIB)


@pytest.mark.parametrize(
    "argv", [["assign", "x.json"], ["assign", "-"], ["assign", "a b.json"], ["assign", ""]]
)
def test_the_lines_the_console_runs_most_are_plain(argv: list[str]) -> None:
    assert plain_assign(argv) == argv[1] == _parsed(argv)[0]  # type: ignore[index]


def test_a_plain_assign_answers_as_the_parser_does(tmp_path: Path) -> None:
    """The same plan, the same refusals: the plain line against the parser's (the option at its default)."""
    doc = {
        "cluster": {"brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}], "topics": {"t": [[1], [2]]}},
        "consumer_group": {
            "group_id": "g",
            "assignor": "range",
            "members": [{"member_id": "m", "rack": "a", "topics": ["t"]}],
        },
    }
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(doc))
    bad.write_text("{")
    for path in (good, bad, tmp_path / "missing.json"):
        runs = []
        for argv in (["assign", str(path)], ["assign", "--max-input-mib", str(MAX_INPUT_MIB), str(path)]):
            run = subprocess.run(
                [sys.executable, "-c", "import sys; from rackplan.cli import main; sys.exit(main())", *argv],
                capture_output=True,
                text=True,
                timeout=60,
            )
            runs.append((run.returncode, re.sub(r'"elapsed_ms":[0-9.e+-]+', "", run.stdout), run.stderr))
        assert runs[0] == runs[1], path.name
        assert runs[0][0] == (0 if path == good else 2), runs[0]
    assert main(["assign", str(tmp_path / "missing.json")]) == 2


def test_a_ctrl_c_while_the_parser_is_built_exits_130_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every other command line imports the agent's modules to build its parser: a terminal's Ctrl-C then
    lands there, and is the command's 130 like one during the command, not a KeyboardInterrupt traceback."""
    import rackplan.parser

    def interrupted(**_: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(rackplan.parser, "build_parser", interrupted)
    assert main(["agent", "check", "--config", "x.yaml"]) == 130
    assert capsys.readouterr().err == ""
