"""bench/interned.py reads CPython's interned-strings table of another process, and the table behaves as the
soak's finding says: it counts live strings exactly, and transient strings never grow it.

A child interpreter interns strings on command; the test reads its table with gdb between commands.
Without gdb, or without the interpreter's symbols, the test skips here and fails in CI (``CI=true``),
where the machine has both: a check that silently never runs is no check.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from bench.interned import InternedTable, interned_table

CHILD = r"""
import sys
kept = []
n = 0
print("ready", flush=True)
for line in sys.stdin:
    op, count = line.split()
    for _ in range(int(count)):
        n += 1
        s = sys.intern("".join(["soak-", str(n), "-string"]))
        if op == "keep":
            kept.append(s)
    s = ""  # the loop's last string is not kept unless it is in ``kept``
    if op == "drop":
        kept.clear()
    print("ok", flush=True)
"""


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI must run it)")
    pytest.skip(reason)


class Child:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    def do(self, op: str, count: int = 0) -> InternedTable:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{op} {count}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok"
        table = interned_table(self.proc.pid)
        assert table is not None
        return table


@pytest.fixture
def child() -> Iterator[Child]:
    if shutil.which("gdb") is None:
        _missing("gdb not found: Debian's gdb package ships it")
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        if interned_table(proc.pid) is None:
            _missing("gdb could not read the interned table: the interpreter has no debug symbols")
        yield Child(proc)
    finally:
        proc.kill()
        proc.wait()


def sized_from_live(t: InternedTable) -> bool:
    """Whether the table has the size a rebuild gives it now: the smallest power of two holding three
    slots per live string (give or take the two strings the child's own loop may hold)."""
    return any(t.log2_size == max(3, (3 * (t.live + d) - 1).bit_length()) for d in range(-2, 3))


def test_live_strings_are_counted_and_freed_ones_keep_their_slots(child: Child) -> None:
    before = child.do("keep", 0)
    kept = child.do("keep", 500)
    assert kept.live - before.live == 500
    dropped = child.do("drop")
    assert dropped.live == before.live
    assert dropped.consumed == kept.consumed  # freeing strings leaves their slots used until a rebuild


def test_transient_strings_never_grow_the_table_and_a_rebuild_sizes_it_from_live_strings(
    child: Child,
) -> None:
    start = child.do("churn", 0)
    slots = 1 << start.log2_size
    # six tables' worth of strings interned and freed at once: far more than the table has slots,
    # so it is rebuilt again and again (every one or two steps); the live strings stay the same
    tables = [child.do("churn", slots // 2) for _ in range(12)]
    assert all(abs(t.live - start.live) <= 2 for t in tables)
    assert all(sized_from_live(t) for t in tables[-8:])
    assert len({t.log2_size for t in tables[-8:]}) == 1


def test_the_table_grows_when_live_strings_need_it(child: Child) -> None:
    start = child.do("keep", 0)
    grown = child.do("keep", 1 << start.log2_size)
    assert grown.live == start.live + (1 << start.log2_size)
    assert grown.log2_size > start.log2_size
    assert 2 * (1 << grown.log2_size) // 3 >= grown.consumed >= grown.live  # every live string has its slot
