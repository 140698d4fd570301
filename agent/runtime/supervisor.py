"""Keep ``rackplan agent run`` alive through a native crash of its Kafka client.

librdkafka 2.16 can abort the whole process from inside an Admin API request
that meets a broker going down (an assertion in
``rd_kafka_enq_once_del_source_return``: librdkafka#4605, #3663, fixed by an
open pull request).  Python cannot catch that: the agent would simply vanish
during the very broker restarts it exists to watch.  So the command runs the
agent as a child process and starts it again, with capped exponential backoff,
when it dies of a signal it did not receive from us (SIGABRT, SIGSEGV, ...).
All state the agent needs is in Kafka (plans are replayed, epochs continue),
so a restart loses nothing.  A child that exits with a code (0 on SIGTERM,
2 on bad settings, 1 on an unreadable plan topic) is final: its code is ours.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

#: set in the child's environment: the agent itself runs there, not another supervisor
CHILD_ENV = "RACKPLAN_AGENT_SUPERVISED"


def backoff(restarts: int, initial_s: float = 1.0, max_s: float = 60.0) -> float:
    """Seconds before restart number ``restarts`` (1, 2, 4, ... capped)."""
    return float(min(max_s, initial_s * 2 ** max(0, restarts - 1)))


def supervise(
    cmd: Sequence[str],
    log: Any,
    *,
    env: dict[str, str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    max_restarts: int | None = None,
    healthy_after_s: float = 300.0,
) -> int:
    """Run ``cmd`` until it exits with a code; restart it when a signal we did not send killed it.

    SIGTERM and SIGINT are forwarded to the child (it stops after its cycle).
    The restart count resets once a child ran ``healthy_after_s``.
    """
    child_env = {**os.environ, **(env or {}), CHILD_ENV: "1"}
    stopping = False
    proc: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True
        if proc is not None and proc.poll() is None:
            proc.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    restarts = 0
    try:
        while True:
            started = time.monotonic()
            proc = subprocess.Popen(list(cmd), env=child_env, preexec_fn=die_with_parent)
            code = proc.wait()
            if code >= 0 or stopping:
                return code if code >= 0 else 0
            if time.monotonic() - started >= healthy_after_s:
                restarts = 0
            restarts += 1
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            delay = backoff(restarts)
            log.error(
                "agent process died of a signal; restarting it",
                signal=name,
                restarts=restarts,
                restart_in_s=delay,
                hint="SIGABRT from librdkafka during a broker restart is a known client bug (librdkafka#4605)",
            )
            if max_restarts is not None and restarts > max_restarts:
                return 1
            sleep(delay)
            if stopping:
                return 0
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def die_with_parent() -> None:
    """In the child: SIGKILL when the supervisor dies (kill -9 of the agent stays a kill of the agent)."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def child_command(argv: Sequence[str]) -> list[str]:
    """This process's own ``rackplan agent run ...`` command line, for the child."""
    return [sys.executable, "-m", "rackplan", *argv]


def supervised() -> bool:
    return os.environ.get(CHILD_ENV) == "1"
