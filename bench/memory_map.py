"""Where a process's resident memory lives: ``/proc/<pid>/smaps`` grouped by the kind of mapping.

The soak (bench/soak.py) saw the agent's RSS creep while malloc's in-use bytes stayed level;
this splits the RSS so the creep can be put on a kind of memory, not guessed at:

- ``heap``: ``[heap]``, glibc's main arena (the main thread's mallocs, grown with brk);
- ``arenas``: glibc's per-thread arenas, anonymous regions reserved 64 MiB (``HEAP_MAX_SIZE`` on
  64-bit) at a 64 MiB-aligned address, of which only the read-write head is used;
- ``stacks``: thread stacks (an anonymous read-write region right above its guard page, a
  one-page ``---p`` mapping) and the main thread's ``[stack]``;
- ``anon``: every other anonymous mapping: Python's object allocator's arenas (1 MiB each on
  Python 3.10+, merged by the kernel when adjacent), malloc's large blocks (mmapped above its
  threshold), librdkafka's and OpenSSL's own mmaps;
- ``file``: file-backed mappings (the interpreter, shared libraries, extension modules);
- ``other``: the kernel's ``[vdso]``, ``[vvar]`` and the like.

Reading smaps is Linux only; the kinds are heuristics on glibc's layout (an anonymous mmap that
happens to start on a 64 MiB boundary counts as an arena), good enough for a trend.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

KINDS = ("heap", "arenas", "stacks", "anon", "file", "other")
ARENA_ALIGN = 64 * 1024 * 1024
_HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \S+ *(.*)$")


@dataclass(frozen=True, slots=True)
class Mapping:
    start: int
    end: int
    perms: str
    path: str
    rss_bytes: int


@dataclass(frozen=True, slots=True)
class MemoryMap:
    """Resident bytes by kind (:data:`KINDS`), and how many mappings each kind has."""

    rss: dict[str, int] = field(default_factory=dict)
    regions: dict[str, int] = field(default_factory=dict)


def parse_smaps(text: str) -> list[Mapping]:
    """The mappings of an smaps text, in address order, with each one's ``Rss``."""
    out: list[Mapping] = []
    head: tuple[int, int, str, str] | None = None
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            head = (int(m[1], 16), int(m[2], 16), m[3], m[4].strip())
        elif line.startswith("Rss:") and head is not None:
            out.append(Mapping(*head, rss_bytes=int(line.split()[1]) * 1024))
            head = None
    return out


def kind_of(prev: Mapping | None, m: Mapping, nxt: Mapping | None, page: int) -> str:
    """The kind of mapping ``m``, given its neighbours (a guard page below marks a thread stack; a
    reserved ``---p`` tail above an aligned start marks a malloc arena)."""
    if m.path == "[heap]":
        return "heap"
    if m.path == "[stack]":
        return "stacks"
    if m.path.startswith("["):
        return "other"
    if m.path:
        return "file"
    if m.perms.startswith("rw"):
        if m.start % ARENA_ALIGN == 0 and (
            m.end - m.start == ARENA_ALIGN
            or (nxt is not None and nxt.start == m.end and nxt.perms.startswith("---") and not nxt.path)
        ):
            return "arenas"
        if (
            prev is not None
            and prev.end == m.start
            and prev.end - prev.start == page
            and prev.perms.startswith("---")
            and not prev.path
        ):
            return "stacks"
    return "anon"


def classify(mappings: list[Mapping], page: int = 4096) -> MemoryMap:
    """Resident bytes and mapping counts by kind."""
    rss = dict.fromkeys(KINDS, 0)
    regions = dict.fromkeys(KINDS, 0)
    for i, m in enumerate(mappings):
        prev = mappings[i - 1] if i else None
        nxt = mappings[i + 1] if i + 1 < len(mappings) else None
        k = kind_of(prev, m, nxt, page)
        rss[k] += m.rss_bytes
        if not m.perms.startswith("---"):  # guard pages and reserved tails: never resident
            regions[k] += 1
    return MemoryMap(rss, regions)


def read_memory_map(pid: int) -> MemoryMap:
    """``pid``'s resident memory by kind; empty where smaps cannot be read (not Linux, process gone)."""
    try:
        return classify(parse_smaps(Path(f"/proc/{pid}/smaps").read_text()))
    except OSError:
        return MemoryMap()


def thread_count(pid: int) -> int:
    """``pid``'s thread count (``Threads:`` in ``/proc/<pid>/status``); 0 where it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0
