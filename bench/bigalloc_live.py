"""The big blocks still alive in a ``bench/native/bigalloc.c`` log, grouped by the call stack that made them.

Run:  python -m bench.bigalloc_live LOG [--depth N]

The log has one record per event: ``A old new size tid`` (an allocation, ``old`` is ``(nil)``) or
``R old new size tid`` (a realloc of ``old`` into ``new``), each followed by its stack (one frame a line,
glibc's ``backtrace_symbols_fd`` format) and a line ``.``; and ``F ptr`` for the free of a logged block.
A block followed through reallocs counts how often it was grown, so a buffer that keeps growing shows.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

_FRAME = re.compile(r"^(?P<lib>[^(\[]*)\((?P<sym>[^)]*)\)\[")


@dataclass(frozen=True, slots=True)
class Block:
    """A live block: its size, the stack that made it (outermost last), its event number and reallocs."""

    size: int
    stack: tuple[str, ...]
    seq: int
    reallocs: int


def frame(line: str) -> str | None:
    """``libname:symbol+offset`` of one backtrace line; None for the shim's own frames."""
    m = _FRAME.match(line)
    if m is None:
        return line.strip() or None
    lib = m["lib"].rsplit("/", 1)[-1]
    return None if "bigalloc" in lib else f"{lib}:{m['sym'] or '?'}"


def live_blocks(lines: Iterable[str]) -> tuple[dict[str, Block], int]:
    """The blocks alive at the log's end (by address) and the number of allocation events read."""
    live: dict[str, Block] = {}
    seq = 0
    it = iter(lines)
    for line in it:
        if line.startswith("F "):
            live.pop(line.split()[1], None)
            continue
        if not line.startswith(("A ", "R ")):
            continue
        kind, old, new, size = line.split()[:4]
        stack: list[str] = []
        for f in it:
            if f.rstrip("\n") == ".":
                break
            if (name := frame(f)) is not None:
                stack.append(name)
        seq += 1
        grown = live.pop(old).reallocs + 1 if kind == "R" and old in live else 0
        live[new] = Block(int(size), tuple(stack), seq, grown)
    return live, seq


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--depth", type=int, default=10, help="stack frames that make a group")
    a = ap.parse_args(argv)
    with open(a.log, errors="replace") as f:
        live, events = live_blocks(f)
    total = sum(b.size for b in live.values())
    print(f"{events} allocation events; {len(live)} blocks alive, {total / 2**20:.2f} MiB")
    groups: dict[tuple[str, ...], list[Block]] = defaultdict(list)
    for b in live.values():
        groups[b.stack[: a.depth]].append(b)
    for stack, blocks in sorted(groups.items(), key=lambda kv: -sum(b.size for b in kv[1]))[:15]:
        size = sum(b.size for b in blocks)
        print(
            f"\n{size / 2**20:.2f} MiB in {len(blocks)} block(s), largest {max(b.size for b in blocks)}, "
            f"grown by realloc up to {max(b.reallocs for b in blocks)} times, made at event {min(b.seq for b in blocks)}"
        )
        for name in stack:
            print(f"    {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
