"""bench/bigalloc_live.py: the blocks alive at a log's end, followed through reallocs, by stack."""

from __future__ import annotations

from bench.bigalloc_live import frame, live_blocks

STACK_A = [
    "/tmp/bigalloc.so(+0x12e1)[0x7f0000000001]\n",
    "/usr/lib/libpython3.11.so.1.0(PyDict_SetDefault+0x268)[0x7f0000000002]\n",
    "/usr/lib/libpython3.11.so.1.0(PyUnicode_InternInPlace+0x56)[0x7f0000000003]\n",
]
STACK_B = ["/x/librdkafka.so.1(rd_buf_write+0x10)[0x7f0000000004]\n"]


def record(kind: str, old: str, new: str, size: int, stack: list[str]) -> list[str]:
    return [f"{kind} {old} {new} {size} 7\n", *stack, ".\n"]


def test_a_block_is_followed_through_reallocs_and_forgotten_when_freed() -> None:
    log = [
        *record("A", "(nil)", "0x10", 200_000, STACK_A),
        *record("A", "(nil)", "0x20", 300_000, STACK_B),
        *record("R", "0x10", "0x30", 400_000, STACK_A),
        *record("R", "0x30", "0x40", 800_000, STACK_A),
        "F 0x20\n",
        *record("A", "(nil)", "0x50", 150_000, STACK_B),
        "F 0x50\n",
    ]
    live, events = live_blocks(log)
    assert events == 5
    assert set(live) == {"0x40"}
    block = live["0x40"]
    assert (block.size, block.reallocs, block.seq) == (800_000, 2, 4)
    assert block.stack == (
        "libpython3.11.so.1.0:PyDict_SetDefault+0x268",
        "libpython3.11.so.1.0:PyUnicode_InternInPlace+0x56",
    )


def test_frames_name_the_library_and_symbol_and_drop_the_shim() -> None:
    assert frame(STACK_A[0]) is None
    assert frame(STACK_B[0]) == "librdkafka.so.1:rd_buf_write+0x10"
    assert frame("/lib/libc.so.6(+0x2724a)[0x7f]\n") == "libc.so.6:+0x2724a"
