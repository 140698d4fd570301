"""The supervisor of ``rackplan agent run``: a child killed by a signal is started again; an exit code is final."""

from __future__ import annotations

import sys
from pathlib import Path

from rackplan.agent.core.logging import get_logger
from rackplan.agent.runtime.supervisor import CHILD_ENV, backoff, supervise


def test_a_child_that_aborts_is_restarted_and_its_exit_code_is_final(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    script = (
        "import os, pathlib, sys\n"
        f"p = pathlib.Path({str(runs)!r})\n"
        "n = int(p.read_text()) + 1 if p.exists() else 1\n"
        "p.write_text(str(n))\n"
        f"assert os.environ[{CHILD_ENV!r}] == '1'\n"
        "if n < 3:\n"
        "    os.abort()  # what librdkafka's assertion does\n"
        "sys.exit(7)\n"
    )
    slept: list[float] = []
    code = supervise([sys.executable, "-c", script], get_logger("t"), sleep=slept.append)
    assert code == 7
    assert runs.read_text() == "3"
    assert slept == [backoff(1), backoff(2)] == [1.0, 2.0]


def test_restarts_are_bounded_when_asked() -> None:
    slept: list[float] = []
    code = supervise(
        [sys.executable, "-c", "import os; os.abort()"], get_logger("t"), sleep=slept.append, max_restarts=2
    )
    assert code == 1 and len(slept) == 2


def test_backoff_is_capped() -> None:
    assert [backoff(n) for n in (1, 2, 3, 7, 8, 20)] == [1.0, 2.0, 4.0, 60.0, 60.0, 60.0]


def test_the_child_dies_with_a_killed_supervisor(tmp_path: Path) -> None:
    """kill -9 of `rackplan agent run` must not leave its agent running (the HA tests rely on it)."""
    import os
    import signal
    import subprocess
    import time

    pid_file = tmp_path / "child.pid"
    child = f"import os, pathlib, time; pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid())); time.sleep(60)"
    sup = (
        "import sys\n"
        "from rackplan.agent.core.logging import get_logger\n"
        "from rackplan.agent.runtime.supervisor import supervise\n"
        f"sys.exit(supervise([sys.executable, '-c', {child!r}], get_logger('t')))\n"
    )
    p = subprocess.Popen([sys.executable, "-c", sup])
    deadline = time.monotonic() + 20
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child_pid = int(pid_file.read_text())
    p.send_signal(signal.SIGKILL)
    p.wait(10)
    deadline = time.monotonic() + 10
    while True:
        try:
            os.kill(child_pid, 0)
        except ProcessLookupError:
            break
        # a zombie until reaped by init counts as gone: check its state
        state = (
            Path(f"/proc/{child_pid}/stat").read_text().split()[2]
            if Path(f"/proc/{child_pid}/stat").exists()
            else "Z"
        )
        if state == "Z":
            break
        assert time.monotonic() < deadline, "the child outlived its supervisor"
        time.sleep(0.05)
