"""``rackplan assign``: the contract's command (docs/CONTRACT.md).

One JSON document in, one out, exit 2 with one line naming the field on bad
input.  The parser and the other subcommands are wired by the composition
root, :mod:`rackplan.cli`; this module knows nothing above the assignor.
"""

from __future__ import annotations

import gc
import json
import sys

from .bounded import TooLargeError, read_bounded
from .fields import HugeInt, InputError, one_line
from .model import Cluster, ConsumerGroup, StreamsApp
from .parse import parse_instance

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (issue 29)

if TYPE_CHECKING:
    import argparse
    from typing import Any, TextIO

EXIT_BAD_INPUT = 2

#: Largest instance read, in MiB (``--max-input-mib``): about seven times the largest benchmarked
#: instance (bench/bench_cli.py's 4.5M partitions: 36.0 MB, 1 GiB peak RSS); ``/dev/zero`` stops here.
MAX_INPUT_MIB = 256
#: Deepest JSON nesting accepted (ignored fields included); deeper documents exit 2.
MAX_DEPTH = 100_000
#: Stack for decoding deep documents: CPython's decoder needs a few hundred bytes per level.
_DEEP_STACK = 256 * 1024 * 1024
#: Recursion limit above :data:`MAX_DEPTH` while decoding deep documents: room for the frames that call the
#: decoder (about ten), so that it never stops at or below the limit; the exact limit is checked after.
_FRAMES = 1_000


def _fail(message: str) -> int:
    write_err(f"rackplan: error: {one_line(message)}\n")
    return EXIT_BAD_INPUT


def _write(stream: TextIO, text: str, errors: str = "strict") -> None:
    """UTF-8 bytes to the stream's buffer whatever its encoding; text to a stream that has none (StringIO)."""
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        stream.write(text)
        return
    stream.flush()
    buffer.write(text.encode("utf-8", errors))
    buffer.flush()


def write_err(text: str) -> None:
    """Text to stderr as UTF-8 (unencodable characters escaped): the one way the command line reports."""
    _write(sys.stderr, text, "backslashreplace")


def _read(source: str, limit: int) -> bytes:
    """The raw bytes of the instance, at most ``limit`` (:class:`TooLargeError` beyond, reading stops there):
    a file and stdin are decoded by the same rule."""
    if source == "-":
        buffer = getattr(sys.stdin, "buffer", None)
        if buffer is not None:
            return read_bounded(buffer, limit)
        data = sys.stdin.read(limit + 1).encode("utf-8", "surrogatepass")  # a text stream (tests)
        if len(data) > limit:
            raise TooLargeError(limit)
        return data
    with open(source, "rb") as f:
        return read_bounded(f, limit)


def positive_mib(text: str) -> int:
    """``--max-input-mib``'s value: a whole number of MiB, at least 1 (argparse calls it, so it is loaded)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of MiB, got {text[:32]!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 MiB, got {value}")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _huge_int(digits: str) -> int | HugeInt:
    try:
        return int(digits)
    except ValueError:  # beyond sys.get_int_max_str_digits()
        return HugeInt(digits)


class _FloatSeen:
    """``parse_float`` hook that notes whether the document held any float (called only for floats)."""

    def __init__(self) -> None:
        self.seen = False

    def __call__(self, text: str) -> float:
        self.seen = True
        return float(text)


def decode(data: bytes) -> tuple[Any, bool]:
    """Strict JSON from UTF-8 bytes, whatever the nesting up to :data:`MAX_DEPTH`.

    Returns the document and whether it provably holds no boolean and no
    float (no ``true``/``false`` bytes anywhere, no float literal), which
    lets :func:`~rackplan.assignor.parse.parse_cluster` check replica lists by their
    distinct values.  Raises :class:`UnicodeDecodeError`, :class:`ValueError`
    (not JSON) or :class:`RecursionError` (nested deeper than :data:`MAX_DEPTH`).
    The common case is one ``json.loads``; only documents that hit a limit are
    decoded again: with integers too long for ``int`` kept as
    :class:`~rackplan.assignor.fields.HugeInt` (an ignored field may hold one),
    or on a thread with a deep stack, whose depth is then counted exactly.
    """
    text = data.decode("utf-8")
    floats = _FloatSeen()
    try:
        try:
            doc = json.loads(text, parse_constant=_reject_constant, parse_float=floats)
        except json.JSONDecodeError:
            raise
        except ValueError:  # an integer too long for int(), or a NaN (which fails again)
            doc = json.loads(text, parse_constant=_reject_constant, parse_int=_huge_int, parse_float=floats)
    except RecursionError:  # deeper than the caller's recursion limit allows, maybe not than MAX_DEPTH
        doc = _decode_deep(text, floats)
    else:
        if sys.getrecursionlimit() > MAX_DEPTH:  # a caller raised the limit: the decoder no longer bounds it
            _check_depth(text)
    plain = not floats.seen and data.find(b"true") < 0 and data.find(b"false") < 0
    return doc, plain


def nesting_depth(text: str) -> int:
    """How deeply the arrays and objects of a valid JSON text nest (``[]`` is 1, ``[[1]]`` 2, ``1`` 0).

    Brackets outside strings are the structure; strings are cut out first
    (the text is valid JSON, so every string is ``"..."`` with backslash
    escapes).  All C-level passes: a regular expression, then a running sum.
    """
    import re  # only documents deeper than the default recursion limit are counted (issue 29: start-up)
    from itertools import accumulate

    brackets = re.sub(r"[^\[\]{}]+", "", re.sub(r'"[^"\\]*(?:\\.[^"\\]*)*"', "", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _check_depth(text: str) -> None:
    if nesting_depth(text) > MAX_DEPTH:
        raise RecursionError(f"JSON nested deeper than {MAX_DEPTH} levels")


def _decode_deep(text: str, floats: _FloatSeen) -> Any:
    """The document decoded on a thread with a deep stack, refused when nested deeper than :data:`MAX_DEPTH`.

    The decoder counts levels against the recursion limit, which also counts
    the frames that call it: the limit is set with room for those, and the
    depth is then counted exactly (:func:`nesting_depth`), so that 100,000
    levels are accepted and 100,001 refused wherever the decoder stops.
    """
    import threading  # only deep documents need a thread with a deep stack (issue 29: start-up)

    result: list[Any] = []
    error: list[BaseException] = []

    def work() -> None:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(MAX_DEPTH + _FRAMES)
        try:
            result.append(
                json.loads(text, parse_constant=_reject_constant, parse_int=_huge_int, parse_float=floats)
            )
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
    _check_depth(text)
    return result[0]


def assign_document(
    doc: Any, pairs_as_lists: bool = True, no_bools_or_floats: bool = False
) -> dict[str, Any]:
    """Validate ``doc`` and compute its plan document; raises :class:`InputError`.

    ``pairs_as_lists=False``: partitions stay tuples, for :func:`dumps` only
    (see :func:`rackplan.assignor.consumer.plan_document`); ``no_bools_or_floats``
    as :func:`decode` says (see :func:`rackplan.assignor.parse.parse_cluster`).
    """
    cluster, spec = parse_instance(doc, no_bools_or_floats)
    return plan_model(cluster, spec, pairs_as_lists)


def plan_model(
    cluster: Cluster, spec: ConsumerGroup | StreamsApp, pairs_as_lists: bool = True
) -> dict[str, Any]:
    """The plan document of a parsed instance; raises :class:`InputError` (e.g. a Streams app without clients)."""
    if isinstance(spec, ConsumerGroup):
        from .consumer import plan_document

        return plan_document(cluster, spec, pairs_as_lists)
    from .streams import plan_document as streams_plan_document

    return streams_plan_document(cluster, spec)


def dumps(doc: Any) -> str:
    """Canonical JSON: the same plan always gives the same bytes."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def cmd_assign(args: argparse.Namespace) -> int:
    """``rackplan assign`` as the parser hands it over: :func:`run_assign` of its arguments."""
    return run_assign(args.instance, getattr(args, "max_input_mib", MAX_INPUT_MIB))


def run_assign(instance: str, max_input_mib: int = MAX_INPUT_MIB) -> int:
    """``rackplan assign INSTANCE``, with the cyclic garbage collector paused.

    Decoding a huge instance allocates millions of lists and tuples, and each
    allocation burst triggers a collection that rescans everything still
    alive: on 4.5M partitions that is two thirds of ``json.loads`` and more
    of the rest.  Nothing here builds reference cycles worth collecting in
    one short run, so collection resumes (if it was on) when we return.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _assign(instance, max_input_mib << 20)
    finally:
        if was_enabled:
            gc.enable()


def _assign(instance: str, limit: int) -> int:
    try:
        data = _read(instance, limit)
    except TooLargeError as e:
        what = "stdin" if instance == "-" else repr(instance)
        return _fail(f"INSTANCE: {what} is {e} (--max-input-mib raises it)")
    except FileNotFoundError:
        return _fail(f"INSTANCE: no such file {instance!r}")
    except OSError as e:
        return _fail(f"INSTANCE: cannot read {instance!r}: {e}")
    try:
        doc, plain = decode(data)
    except UnicodeDecodeError as e:
        return _fail(f"(document): not valid UTF-8 at byte {e.start}")
    except RecursionError:
        return _fail(f"(document): JSON nested deeper than {MAX_DEPTH} levels")
    except ValueError as e:
        return _fail(f"(document): not valid JSON: {e}")
    del data
    try:
        cluster, spec = parse_instance(doc, plain)
        del doc  # the decoded document is the largest thing alive (GB on 4.5M partitions): free it first
        out = plan_model(cluster, spec, pairs_as_lists=False)
    except InputError as e:
        return _fail(str(e))
    except NotImplementedError as e:
        return _fail(str(e))
    _write(sys.stdout, dumps(out) + "\n")
    return 0
