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
import threading
from collections.abc import Sequence
from typing import Any

from .parse import HugeInt, InputError, one_line, parse_instance

EXIT_BAD_INPUT = 2

#: Deepest JSON nesting accepted (ignored fields included); deeper documents exit 2.
MAX_DEPTH = 100_000
#: Stack for decoding deep documents: CPython's decoder needs a few hundred bytes per level.
_DEEP_STACK = 256 * 1024 * 1024


def _fail(message: str) -> int:
    _write_err(f"rackplan: error: {one_line(message)}\n")
    return EXIT_BAD_INPUT


def _write_err(text: str) -> None:
    sys.stderr.flush()
    sys.stderr.buffer.write(text.encode("utf-8", "backslashreplace"))
    sys.stderr.buffer.flush()


def _read(source: str) -> bytes:
    """The raw bytes of the instance: a file and stdin are decoded by the same rule."""
    if source == "-":
        return sys.stdin.buffer.read()
    with open(source, "rb") as f:
        return f.read()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _huge_int(digits: str) -> int | HugeInt:
    try:
        return int(digits)
    except ValueError:  # beyond sys.get_int_max_str_digits()
        return HugeInt(digits)


def decode(data: bytes) -> Any:
    """Strict JSON from UTF-8 bytes, whatever the nesting up to :data:`MAX_DEPTH`.

    Raises :class:`UnicodeDecodeError`, :class:`ValueError` (not JSON, or too
    deep as :class:`RecursionError`).  The common case is one ``json.loads``;
    only documents that hit a limit are decoded again: with integers too long
    for ``int`` kept as :class:`~assignor.parse.HugeInt` (an ignored field may
    hold one), or on a thread with a deep stack for deep nesting.
    """
    text = data.decode("utf-8")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        return _decode_deep(text)
    except json.JSONDecodeError:
        raise
    except ValueError:  # an integer too long for int(), or a NaN (which fails again)
        return json.loads(text, parse_constant=_reject_constant, parse_int=_huge_int)


def _decode_deep(text: str) -> Any:
    result: list[Any] = []
    error: list[BaseException] = []

    def work() -> None:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(MAX_DEPTH + 50)
        try:
            result.append(json.loads(text, parse_constant=_reject_constant, parse_int=_huge_int))
        except BaseException as e:  # handed to the caller's thread
            error.append(e)
        finally:
            sys.setrecursionlimit(limit)

    old = threading.stack_size(_DEEP_STACK)
    try:
        worker = threading.Thread(target=work, name="rackplan-deep-json")
        worker.start()
        worker.join()
    finally:
        threading.stack_size(old)
    if error:
        raise error[0]
    return result[0]


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
        data = _read(args.instance)
    except FileNotFoundError:
        return _fail(f"INSTANCE: no such file {args.instance!r}")
    except OSError as e:
        return _fail(f"INSTANCE: cannot read {args.instance!r}: {e}")
    try:
        doc = decode(data)
    except UnicodeDecodeError as e:
        return _fail(f"(document): not valid UTF-8 at byte {e.start}")
    except RecursionError:
        return _fail(f"(document): JSON nested deeper than {MAX_DEPTH} levels")
    except ValueError as e:
        return _fail(f"(document): not valid JSON: {e}")
    try:
        out = assign_document(doc)
    except InputError as e:
        return _fail(str(e))
    except NotImplementedError as e:
        return _fail(str(e))
    sys.stdout.flush()
    sys.stdout.buffer.write(dumps(out).encode("utf-8"))
    sys.stdout.buffer.write(b"\n")
    sys.stdout.buffer.flush()
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
        _write_err(
            one_line(
                f"rackplan: internal error: {type(e).__name__}: {e} (set RACKPLAN_DEBUG=1 for a traceback)"
            )
            + "\n"
        )
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
