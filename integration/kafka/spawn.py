"""Child processes of the suite (brokers, Java apps) that die with it, whichever thread starts them.

Each child gets ``PR_SET_PDEATHSIG`` (:func:`rackplan.agent.runtime.supervisor.die_with_parent`), so a
suite that crashed leaves no JVM behind.  But Linux sends that signal when the *thread* that
forked the child exits, not the process: a broker restarted from a test's short-lived thread
(``KafkaCluster.restart`` in a ``threading.Thread``) was SIGKILLed as soon as that thread
ended.  So every child is forked by one long-lived daemon thread of this module, which ends
only with the process: a child outlives the thread that asked for it, and still dies with the
process.
"""

from __future__ import annotations

import queue
import subprocess
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any, cast

from rackplan.agent.runtime.supervisor import die_with_parent

_Request = tuple[Sequence[str], dict[str, Any], "Future[subprocess.Popen[bytes]]"]

_requests: queue.SimpleQueue[_Request] = queue.SimpleQueue()
_lock = threading.Lock()
_thread: threading.Thread | None = None


def _serve() -> None:
    """The forking thread: runs every ``Popen`` asked for, for the whole life of the process."""
    while True:
        cmd, kwargs, done = _requests.get()
        if not done.set_running_or_notify_cancel():
            continue
        try:
            proc = subprocess.Popen(cmd, preexec_fn=die_with_parent, **kwargs)
            done.set_result(cast("subprocess.Popen[bytes]", proc))
        except BaseException as e:  # handed to the caller, which raises it on its own thread
            done.set_exception(e)


def spawner_thread() -> threading.Thread:
    """The one thread that forks the suite's children (started on first use)."""
    global _thread
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_serve, name="rackplan-it-spawner", daemon=True)
            _thread.start()
        return _thread


def spawn(cmd: Sequence[str], **popen_kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(cmd, **popen_kwargs)`` forked by the spawner thread; SIGKILLed when the process dies."""
    spawner_thread()
    done: Future[subprocess.Popen[bytes]] = Future()
    _requests.put((list(cmd), popen_kwargs, done))
    return done.result()
