"""The ``rackplan`` command's parser: every package's subcommands under one ``argparse`` tree.

Each package contributes its own subcommands and knows nothing above itself:
``assign`` comes from :mod:`rackplan.assignor.cli`, ``agent run`` and ``demo``
from :mod:`rackplan.agent.commands`, ``fleet ...`` from
:mod:`rackplan.fleet.commands`.  ``assign`` is run by outside tests thousands
of times, so for it the parser is built without importing the agent (no Kafka
client, no pydantic-settings, no PySpark glue), and :mod:`rackplan.cli` runs
the plain ``rackplan assign FILE`` without this module at all.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from rackplan.assignor.catalog import assign_epilog
from rackplan.assignor.cli import MAX_INPUT_MIB, cmd_assign, positive_mib

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (issue 29)

if TYPE_CHECKING:
    from typing import Any

#: the shells ``rackplan completion`` writes a script for (shtab's)
SHELLS = ("bash", "zsh", "tcsh")
#: shtab's file completion (shtab.FILE), set on file arguments without importing shtab at start-up
FILE_COMPLETION = {"bash": "_shtab_compgen_files", "zsh": "_files", "tcsh": "f"}


def version() -> str:
    """The installed distribution's version, from the package metadata (looked up only when asked)."""
    import rackplan

    return rackplan.__version__


class _Version(argparse.Action):
    """``--version``, with the version looked up only when the flag is given."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        sys.stdout.write(f"rackplan {version()}\n")
        parser.exit()


def terminal_width() -> int:
    """``shutil.get_terminal_size().columns``, the width argparse wraps help to, without ``shutil``.

    argparse's formatter imports ``shutil`` (and with it ``bz2``, ``lzma``, ``zlib``) when it is made,
    and it is made for every ``add_argument``: about a tenth of ``rackplan assign``'s start-up above
    the interpreter on a small instance (issue 29).  The same rule: ``COLUMNS`` when a positive
    number, else the terminal of stdout, else 80.
    """
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return columns if columns > 0 else 80


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, its width from :func:`terminal_width` (no ``shutil`` import)."""

    def __init__(
        self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None
    ):
        super().__init__(
            prog, indent_increment, max_help_position, terminal_width() - 2 if width is None else width
        )


class RawDescriptionHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's raw-description formatter, its width from :func:`terminal_width` (no ``shutil`` import)."""

    def __init__(
        self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None
    ):
        super().__init__(
            prog, indent_increment, max_help_position, terminal_width() - 2 if width is None else width
        )


def build_parser(with_agent: bool = True) -> argparse.ArgumentParser:
    """The ``rackplan`` parser; ``with_agent=False`` leaves out the agent's and the fleet's subcommands."""
    parser = argparse.ArgumentParser(
        prog="rackplan", description="Rack-locality planning for Kafka.", formatter_class=HelpFormatter
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "assign",
        help="compute a plan for one instance (JSON in, JSON out)",
        description="Compute one plan: the assignment contract's instance in, its plan out (docs/CONTRACT.md).",
        epilog=assign_epilog(),
        formatter_class=RawDescriptionHelpFormatter,
    )
    instance = p.add_argument("instance", help="instance JSON file, or - for stdin")
    setattr(instance, "complete", FILE_COMPLETION)  # noqa: B010 (shtab reads this attribute)
    p.add_argument(
        "--max-input-mib",
        type=positive_mib,
        default=MAX_INPUT_MIB,
        help=f"refuse (exit 2) an instance larger than this many MiB, unread (default {MAX_INPUT_MIB})",
    )
    p.set_defaults(func=cmd_assign)
    if not with_agent:
        return parser
    from rackplan.agent.commands import register as register_agent
    from rackplan.fleet.commands import register as register_fleet

    register_agent(sub)
    register_fleet(sub)
    c = sub.add_parser(
        "completion",
        help="print the shell completion script",
        description="Print the completion script for SHELL. bash: `source <(rackplan completion bash)` "
        "in ~/.bashrc; zsh: `rackplan completion zsh > ${fpath[1]}/_rackplan`.",
    )
    c.add_argument("shell", choices=SHELLS, help="the shell")
    c.set_defaults(func=cmd_completion)
    return parser


def cmd_completion(args: argparse.Namespace) -> int:
    """The completion script of the whole parser, made by shtab from the parser itself.

    Generated, not written by hand, so it cannot drift from the commands: every subcommand,
    option and choice completes, file arguments complete file names, and zsh and tcsh get
    theirs from the same parser.
    """
    import shtab

    sys.stdout.write(shtab.complete(build_parser(), shell=args.shell))
    return 0
