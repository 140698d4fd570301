"""The stop handler never waits for a lock its own thread holds (agent/runtime/signals.py)."""

from __future__ import annotations

import signal
import threading

from rackplan.agent.runtime.signals import stop_handler


def test_the_handler_returns_while_its_thread_holds_the_events_lock() -> None:
    # The state a signal met in the main thread: inside stop.wait(), the event's lock held.
    stop = threading.Event()
    lock = stop._cond  # type: ignore[attr-defined]
    handled = threading.Event()

    def main_thread_in_wait() -> None:
        with lock:
            stop_handler(stop)(signal.SIGTERM, None)
            handled.set()

    t = threading.Thread(target=main_thread_in_wait, daemon=True)
    t.start()
    assert handled.wait(5), "the handler waited for the lock its own thread holds"
    t.join(5)
    assert stop.wait(5), "the stop event was never set"
