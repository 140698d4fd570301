"""The soak's split of a process's RSS by kind of mapping (bench/memory_map.py), on a synthetic smaps."""

from __future__ import annotations

import os

from bench.memory_map import KINDS, classify, parse_smaps, read_memory_map, thread_count

MIB = 1024 * 1024
ARENA = 0x7F0000000000  # 64 MiB-aligned


def vma(start: int, end: int, perms: str, path: str, rss_kib: int) -> str:
    return (
        f"{start:x}-{end:x} {perms} 00000000 00:00 0 {path}\n"
        f"Size: {(end - start) // 1024} kB\nRss: {rss_kib} kB\nPss: {rss_kib} kB\n"
    )


SMAPS = "".join(
    [
        vma(0x555555554000, 0x555555556000, "r-xp", "/usr/bin/python3.11", 8),
        vma(0x555555600000, 0x555555A00000, "rw-p", "[heap]", 3000),
        vma(ARENA, ARENA + 3 * MIB, "rw-p", "", 2048),  # a per-thread arena's used head ...
        vma(ARENA + 3 * MIB, ARENA + 64 * MIB, "---p", "", 0),  # ... and its reserved tail
        vma(0x7F1000000000, 0x7F1000001000, "---p", "", 0),  # a thread stack's guard page ...
        vma(0x7F1000001000, 0x7F1000800000, "rw-p", "", 40),  # ... and the stack above it
        vma(0x7F2000000000, 0x7F2000400000, "rw-p", "", 4096),  # Python's arenas, merged
        vma(0x7F3000000000, 0x7F3000100000, "r--p", "/usr/lib/libc.so.6", 900),
        vma(0x7FFD00000000, 0x7FFD00021000, "rw-p", "[stack]", 132),
        vma(0x7FFD10000000, 0x7FFD10002000, "r-xp", "[vdso]", 8),
    ]
)


def test_each_mapping_is_put_on_its_kind() -> None:
    mappings = parse_smaps(SMAPS)
    assert (
        len(mappings) == 10
        and sum(m.rss_bytes for m in mappings) == (8 + 3000 + 2048 + 40 + 4096 + 900 + 132 + 8) * 1024
    )
    mm = classify(mappings)
    assert {k: v // 1024 for k, v in mm.rss.items()} == {
        "heap": 3000,
        "arenas": 2048,
        "stacks": 40 + 132,
        "anon": 4096,
        "file": 8 + 900,
        "other": 8,
    }
    # Guard pages and reserved tails are no mappings of their own (never resident).
    assert mm.regions == {"heap": 1, "arenas": 1, "stacks": 2, "anon": 1, "file": 2, "other": 1}


def test_an_anonymous_mapping_off_the_arena_alignment_is_no_arena() -> None:
    shifted = SMAPS.replace(f"{ARENA:x}-", f"{ARENA + 4096:x}-", 1)
    mm = classify(parse_smaps(shifted))
    assert mm.rss["arenas"] == 0 and mm.rss["anon"] == (4096 + 2048) * 1024


def test_this_process_reads_as_a_whole() -> None:
    mm = read_memory_map(os.getpid())
    assert set(mm.rss) == set(KINDS) and mm.rss["file"] > 0 and mm.rss["heap"] > 0
    assert thread_count(os.getpid()) >= 1
