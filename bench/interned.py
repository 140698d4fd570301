"""CPython's table of interned strings in another process, read with gdb: the soak's one native step.

Why.  The soak (bench/soak.py) saw the agent's RSS step up once by about 0.9 MiB, always near its
3,000th cycle, in memory above malloc's mmap threshold that no traced Python object explained.  An
allocation log of the agent's process (every ``malloc`` of 128 KiB or more with its call stack) showed
the block: the keys table of CPython's dict of interned strings, resized from ``PyDict_SetDefault``
under ``PyUnicode_InternInPlace``.  That dict is not reachable from Python (a static of
``unicodeobject.c``), so this reads it from outside, as a debugger does.

What the numbers mean (CPython 3.11 ``dictobject.c``):

- ``live``: interned strings alive now (``ma_used``);
- ``consumed``: entry slots used since the table was last built (``dk_nentries``): every string
  interned anew takes one, and one freed leaves its slot used until the next rebuild;
- ``left``: slots left before that rebuild (``dk_usable``);
- ``log2_size``: the table has ``2 ** log2_size`` slots.

A rebuild sizes the table from ``live`` alone (the smallest power of two at least three times
``live``), so the table does not grow while ``live`` is level, however many transient strings pass
through it: confluent-kafka's C code interns topic and field names for every metadata answer, and
each one freed later has used a slot.  The agent holds about 28,000 live interned strings, so its
table starts at ``2 ** 16`` slots (0.92 MiB) and its first rebuild makes it ``2 ** 17`` (1.83 MiB),
where it stays while ``live`` is under 43,690.

Needs gdb and the interpreter's debug symbols (pyenv's builds have them); None otherwise.
Run:  python -m bench.interned PID
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

_FIELDS = ("ma_used", "ma_keys->dk_nentries", "ma_keys->dk_usable", "ma_keys->dk_log2_size")
_VALUE = re.compile(r"^\$\d+ = (\d+)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class InternedTable:
    """The interned-strings dict of one process (module docstring)."""

    live: int
    consumed: int
    left: int
    log2_size: int

    @property
    def table_bytes(self) -> int:
        """The keys table's size: 4-byte indices, 16-byte entries for two thirds of the slots (3.11)."""
        slots = 1 << self.log2_size
        return slots * 4 + (2 * slots // 3) * 16


def interned_table(pid: int, timeout_s: float = 30.0) -> InternedTable | None:
    """Attach gdb to ``pid`` for a moment (it stops the process while it reads) and read the table."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return None
    cmd = [gdb, "-p", str(pid), "-batch", "-nx"]
    for f in _FIELDS:
        cmd += ["-ex", f"p (long)((PyDictObject*)interned)->{f}"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    values = [int(v) for v in _VALUE.findall(out)]
    if len(values) != len(_FIELDS):
        return None
    return InternedTable(*values)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: python -m bench.interned PID", file=sys.stderr)
        return 2
    table = interned_table(int(argv[0]))
    if table is None:
        print("could not read the table (gdb missing, no debug symbols, or no such process)", file=sys.stderr)
        return 1
    print(
        f"live {table.live}, consumed {table.consumed}, left {table.left}, "
        f"2**{table.log2_size} slots ({table.table_bytes / 2**20:.2f} MiB)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
