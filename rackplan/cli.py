"""The composition root of the ``rackplan`` command: its entry point, and the one place that sees every package.

The parser is :mod:`rackplan.parser`.  ``rackplan assign FILE`` (no option) is what outside
tests and followers run thousands of times, and on a small instance the command is all start-up:
it is run without ``argparse`` (with ``gettext`` and ``locale``) and without building any parser,
about a tenth of the command's CPU above the floor (issue 29).  Every other command line, options
and ``--help`` included, goes through the parser, so its errors and help stay argparse's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from rackplan.assignor.cli import run_assign, write_err
from rackplan.assignor.fields import one_line


def plain_assign(argv: Sequence[str]) -> str | None:
    """The instance of a command line the parser would read as ``assign INSTANCE`` and nothing else.

    Exactly two words, the second not an option: ``-`` (stdin) or a word not starting with ``-``
    (the parser reads no ``@file`` and abbreviates nothing else here), so the parser would set the
    instance and leave ``--max-input-mib`` at its default.  None for any other line.
    """
    if len(argv) == 2 and argv[0] == "assign" and (argv[1] == "-" or not argv[1].startswith("-")):
        return argv[1]
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; bad input exits 2 (inside the commands), a bug 1 with one line."""
    argv = list(sys.argv[1:] if argv is None else argv)
    instance = plain_assign(argv)
    if instance is not None:
        return _guarded(lambda: run_assign(instance))
    return _guarded(lambda: _parsed_and_run(argv))


def _parsed_and_run(argv: list[str]) -> int:
    """Any other command line: parsed (the agent's modules imported: a Ctrl-C meanwhile is 130 too), then run."""
    from rackplan.parser import build_parser

    args = build_parser(with_agent=argv[:1] != ["assign"]).parse_args(argv)
    code: int = args.func(args)
    return code


def _guarded(command: Callable[[], int]) -> int:
    """The command's exit code; Ctrl-C 130, and a bug (not bad input) one line on stderr and 1."""
    try:
        return command()
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # a bug, not bad input: one line, traceback on request
        if os.environ.get("RACKPLAN_DEBUG"):
            raise
        write_err(
            one_line(
                f"rackplan: internal error: {type(e).__name__}: {e} (set RACKPLAN_DEBUG=1 for a traceback)"
            )
            + "\n"
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
