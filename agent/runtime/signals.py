"""Signals that stop the agent: shared by ``rackplan agent run`` and ``rackplan demo --keep-running``."""

from __future__ import annotations

import signal
import threading
from types import FrameType


def install_stop_handlers(stop: threading.Event) -> None:
    """SIGTERM and SIGINT end the loop after its current cycle (exit code 0)."""

    def handler(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
