"""Start-up steps asked again while the brokers catch up, for as long as start-up may take.

A busy cluster answers the agent's first requests with errors that clear by
themselves: its own topics, created a moment ago, are UNKNOWN_TOPIC_OR_PART to
the broker that answers; a group or transaction coordinator is still loading;
a broker restarts.  Start-up used to ask a few times in three seconds and then
exit 1, which the supervisor treats as final (issue 24).  Each step now runs
through :func:`retry_startup`: an error :func:`rackplan.agent.kafka.errors.transient`
calls transient is logged (``start-up waiting``: the step, the error's name,
the attempt, the delay) and the step runs again after a capped exponential
backoff with jitter, until ``kafka.startup_retry_s`` has passed
(:class:`StartupTimedOut`, exit 1, naming the error).  Anything else (an
authorization or configuration error, a topic set up wrongly) stops start-up
at once with its name: retrying cannot fix it.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ..core.errors import AgentError, CannotRun
from ..core.ports import Logger
from ..kafka.errors import error_name, transient
from ..kafka.exceptions import PublishError

T = TypeVar("T")


class StartupTimedOut(PublishError):
    """A start-up step still failed with a transient error when ``kafka.startup_retry_s`` ran out."""


class StartupStopped(AgentError):
    """The agent was asked to stop while start-up waited to ask again: not an error."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delays between attempts: ``initial_s`` doubling up to ``max_s``, each scaled by a factor in [0.5, 1]
    (so agents restarted together do not ask in step), within ``budget_s`` in all."""

    initial_s: float
    max_s: float
    budget_s: float

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Seconds before attempt ``attempt + 1`` (``attempt`` >= 1 failed so far)."""
        base = min(self.max_s, self.initial_s * 2.0 ** min(attempt - 1, 30))
        return base * (0.5 + rng.random() / 2)


def retry_startup(
    step: Callable[[], T],
    what: str,
    backoff: Backoff,
    log: Logger,
    stop: threading.Event,
    *,
    check: Callable[[], None] = lambda: None,
    monotonic: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
) -> T:
    """``step()``, asked again after transient errors; ``what`` names it in the logs and errors.

    ``check`` runs before each new attempt (with a lease: raises when it was lost meanwhile).
    :class:`CannotRun` and non-transient errors pass at once (a bare ``KafkaException`` as an
    :class:`CannotRun` naming it); :class:`StartupTimedOut` once ``backoff.budget_s`` is spent;
    :class:`StartupStopped` when ``stop`` is set while waiting.
    """
    rng = rng if rng is not None else random.Random()
    started = monotonic()
    attempt = 0
    while True:
        try:
            result = step()
        except CannotRun:
            raise
        except Exception as e:
            name = error_name(e, type(e).__name__)
            if not transient(e):
                if type(e).__name__ == "KafkaException":  # no wrapper of ours says what it was doing
                    raise CannotRun(f"start-up: {what}: {name}: {e}") from e
                raise
            attempt += 1
            delay = backoff.delay(attempt, rng)
            waited = monotonic() - started
            if waited + delay > backoff.budget_s:
                log.error(
                    "start-up gave up", step=what, error=name, attempts=attempt, waited_s=round(waited, 1)
                )
                raise StartupTimedOut(
                    f"start-up: {what}: still {name} after {attempt} attempts in {waited:.0f} s "
                    f"(kafka.startup_retry_s {backoff.budget_s:g}): {e}"
                ) from e
            log.warning(
                "start-up waiting",
                step=what,
                error=name,
                detail=str(e),
                attempt=attempt,
                retry_in_s=round(delay, 3),
                waited_s=round(waited, 1),
            )
            if stop.wait(delay):
                raise StartupStopped(f"stopped while start-up waited for {what}") from e
            check()
            continue
        if attempt:
            log.info(
                "start-up step done",
                step=what,
                attempts=attempt + 1,
                waited_s=round(monotonic() - started, 1),
            )
        return result
