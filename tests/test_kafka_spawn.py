"""integration/kafka/spawn.py: the suite's children outlive the thread that started them, not the process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from integration.kafka.spawn import spawn
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")


def gone(pid: int) -> bool:
    """The process has exited (no such process, or a zombie nobody reaped yet)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return any(line.split()[1:2] == ["Z"] for line in status.splitlines() if line.startswith("State:"))


def wait_until(pred: object, what: str, timeout: float = 20.0) -> None:
    assert callable(pred)
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_child_outlives_the_short_lived_thread_that_started_it() -> None:
    # KafkaCluster.restart() from a test's thread: the broker must not die when that thread ends.
    started: dict[str, object] = {}

    def start() -> None:
        started["proc"] = spawn(["sleep", "60"])
        started["tid"] = threading.get_native_id()

    t = threading.Thread(target=start)
    t.start()
    t.join()
    proc = started["proc"]
    assert isinstance(proc, subprocess.Popen)
    try:
        # The thread is gone from the kernel too (a parent-death signal would have been sent by now).
        wait_until(lambda: not Path(f"/proc/self/task/{started['tid']}").exists(), "thread never exited")
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)  # still running: not SIGKILLed with its requesting thread
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_a_child_dies_with_the_process_that_started_it() -> None:
    # The guarantee the spawner keeps: a suite killed -9 leaves no broker behind.
    code = (
        "import sys, threading\n"
        "from integration.kafka.spawn import spawn\n"
        "out = {}\n"
        "t = threading.Thread(target=lambda: out.update(p=spawn(['sleep', '60'])))\n"
        "t.start(); t.join()\n"
        "print(out['p'].pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        assert not gone(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        wait_until(lambda: gone(child), "the child outlived the process that started it")
    finally:
        if not gone(child):
            os.kill(child, signal.SIGKILL)
