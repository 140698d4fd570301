"""``rackplan``: the command line.

``rackplan assign`` is the contract of ../shared/CONTRACT.md: one JSON document
in, one out, exit 2 with one line naming the field on bad input.  Other
subcommands (agent, demo) live in :mod:`agent` and are imported lazily so
that ``assign`` never loads a Kafka client.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from .parse import InputError, parse_instance

EXIT_BAD_INPUT = 2


def _fail(message: str) -> int:
    print(f"rackplan: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _read(source: str) -> Any:
    if source == "-":
        text = sys.stdin.read()
    else:
        with open(source, encoding="utf-8") as f:
            text = f.read()
    return json.loads(text)


def assign_document(doc: Any) -> dict[str, Any]:
    """Validate ``doc`` and compute its plan document; raises :class:`InputError`."""
    from .model import ConsumerGroup

    cluster, spec = parse_instance(doc)
    if isinstance(spec, ConsumerGroup):
        from .consumer import plan_document

        return plan_document(cluster, spec)
    from .streams import plan_document as streams_plan_document

    return streams_plan_document(cluster, spec)


def dumps(doc: Any) -> str:
    """Canonical JSON: the same plan always gives the same bytes."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def cmd_assign(args: argparse.Namespace) -> int:
    try:
        doc = _read(args.instance)
    except FileNotFoundError:
        return _fail(f"INSTANCE: no such file {args.instance!r}")
    except (OSError, UnicodeDecodeError) as e:
        return _fail(f"INSTANCE: cannot read {args.instance!r}: {e}")
    except json.JSONDecodeError as e:
        return _fail(f"(document): not valid JSON: {e}")
    except RecursionError:
        return _fail("(document): JSON nested too deeply")
    try:
        out = assign_document(doc)
    except InputError as e:
        return _fail(str(e))
    except NotImplementedError as e:
        return _fail(str(e))
    sys.stdout.write(dumps(out))
    sys.stdout.write("\n")
    return 0


def build_parser(with_agent: bool = True) -> argparse.ArgumentParser:
    """The ``rackplan`` parser; ``with_agent=False`` leaves out the agent's subcommands.

    ``assign`` is run by outside tests thousands of times: it must not pay for
    importing the Kafka client, pydantic-settings or PySpark glue.
    """
    parser = argparse.ArgumentParser(prog="rackplan", description="Rack-locality planning for Kafka.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("assign", help="compute a plan for one instance (JSON in, JSON out)")
    p.add_argument("instance", help="instance JSON file, or - for stdin")
    p.set_defaults(func=cmd_assign)
    if not with_agent:
        return parser
    try:
        from agent.commands import register  # the agent adds its own subcommands
    except ImportError:
        pass
    else:
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(with_agent=argv[:1] != ["assign"])
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # a bug, not bad input: one line, traceback on request
        if os.environ.get("RACKPLAN_DEBUG"):
            raise
        print(
            f"rackplan: internal error: {type(e).__name__}: {e} (set RACKPLAN_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
