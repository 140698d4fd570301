"""``rackplan assign --help`` describes the input and every assignor; ``rackplan completion`` completes in bash.

The help is read from the installed command; the completion script is sourced into a real bash
whose completion function is called as bash calls it on Tab.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

import pytest

from rackplan.assignor import catalog
from rackplan.assignor.model import CONSUMER_ASSIGNORS, STREAMS_ASSIGNORS
from rackplan.assignor.parse import parse_instance
from rackplan.parser import build_parser

CLUSTER = {"brokers": [{"id": 1, "rack": "az-a"}], "topics": {"clicks": [[1]]}}


def rackplan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rackplan", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_every_assignor_the_parser_accepts_has_its_line() -> None:
    assert tuple(catalog.CONSUMER) == CONSUMER_ASSIGNORS
    assert tuple(catalog.STREAMS) == STREAMS_ASSIGNORS


def test_the_defaults_marked_are_the_parsers() -> None:
    """An instance without `assignor` gets the one the help marks (default)."""
    consumer = {"group_id": "g", "members": [{"member_id": "m", "rack": "az-a", "topics": ["clicks"]}]}
    streams = {
        "application_id": "a",
        "subtopologies": [
            {"id": "0", "source_topics": ["clicks"], "changelog_topics": [], "stateful": False}
        ],
        "clients": [{"process_id": "p", "rack": "az-a", "threads": 1}],
    }
    for key, body in (("consumer_group", consumer), ("streams_app", streams)):
        _, parsed = parse_instance({"cluster": CLUSTER, key: body})
        assert parsed.assignor == catalog.DEFAULTS[key], key


def test_assign_help_describes_the_input_and_lists_the_assignors() -> None:
    result = rackplan("assign", "--help")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "docs/CONTRACT.md" in out and "`consumer_group`" in out and "`streams_app`" in out
    for key, lines in (("consumer_group", catalog.CONSUMER), ("streams_app", catalog.STREAMS)):
        section = out.split(f"{key}.assignor:\n", 1)[1]
        for name, line in lines.items():
            (shown,) = [s for s in section.splitlines() if s.split()[:1] == [name]]
            assert line in shown
            assert shown.endswith("(default)") == (catalog.DEFAULTS[key] == name), shown


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    choices: dict[str, Any] = sub.choices
    return choices


COMPLETE = """
source <({python} -m rackplan completion bash)
complete_line() {{
  COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${{#COMP_LINE}}; COMPREPLY=()
  _shtab_rackplan "$1" "${{@: -1}}" "${{@: -2:1}}"
  echo "${{COMPREPLY[*]}}"
}}
"""


def completions(*lines: tuple[str, ...]) -> list[list[str]]:
    """What bash offers on Tab at the end of each command line (one list per line)."""
    script = COMPLETE.format(python=sys.executable) + "".join(
        "complete_line " + " ".join(f"'{w}'" for w in words) + "\n" for words in lines
    )
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0 and not result.stderr, result.stderr
    return [line.split() for line in result.stdout.splitlines()]


def test_bash_completes_every_subcommand_and_its_options() -> None:
    parser = build_parser()
    top = subcommands(parser)
    lines: list[tuple[str, ...]] = [("rackplan", name[:2]) for name in top]
    options = {
        name: [o for a in p._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
        for name, p in top.items()
    }
    lines += [("rackplan", name, opts[0]) for name, opts in options.items() if opts]
    lines += [("rackplan", "agent", "run", "--no"), ("rackplan", "completion", "z")]
    got = completions(*lines)
    for (_, prefix), offered in zip(lines[: len(top)], got, strict=False):
        assert offered and all(o.startswith(prefix) for o in offered)
        assert {n for n in top if n.startswith(prefix)} == set(offered)
    with_options = [n for n, o in options.items() if o]
    for name, offered in zip(with_options, got[len(top) :], strict=False):
        assert options[name][0] in offered, name
    assert got[-2:] == [["--no-supervisor"], ["zsh"]]


@pytest.mark.parametrize("shell", ["zsh", "tcsh"])
def test_the_other_shells_get_a_script_naming_every_subcommand(shell: str) -> None:
    result = rackplan("completion", shell)
    assert result.returncode == 0, result.stderr
    for name in subcommands(build_parser()):
        assert name in result.stdout


def test_an_unknown_shell_is_refused_by_name() -> None:
    result = rackplan("completion", "fish")
    assert result.returncode == 2 and "invalid choice: 'fish'" in result.stderr
