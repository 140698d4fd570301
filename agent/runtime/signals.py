"""Signals that stop the agent: shared by ``rackplan agent run`` and ``rackplan demo --keep-running``."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType


def stop_handler(stop: threading.Event) -> Callable[[int, FrameType | None], None]:
    """A handler that sets ``stop`` from a short-lived thread, never from the handler itself.

    Python runs a handler in the main thread between two of its bytecodes, and that thread may be
    inside ``stop.wait()`` holding the event's (non-reentrant) lock at that moment: ``stop.set()``
    there waits for a lock its own thread holds, forever (an agent hung after SIGTERM about once in
    20 stops). The thread sets the event as soon as the main thread lets the lock go.
    """

    def handler(_signum: int, _frame: FrameType | None) -> None:
        threading.Thread(target=stop.set, name="rackplan-stop", daemon=True).start()

    return handler


def install_stop_handlers(stop: threading.Event) -> None:
    """SIGTERM and SIGINT end the loop after its current cycle (exit code 0)."""
    handler = stop_handler(stop)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
