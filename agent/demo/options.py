"""What ``rackplan demo`` checks before it starts anything: its options, its log file, its own settings.

The demo is a fixed show on the embedded cluster: its agent's settings are its own values only, never
``RACKPLAN_*`` variables (``RACKPLAN_MODE=observe`` made it print "Republished plans" while it published
nothing, ``RACKPLAN_POLL_INTERVAL_S=100`` ended it in a timeout), and a bad option is refused by its name
(``--poll-interval``, ``--log-file``) before the cluster starts or a log file is made.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from contextlib import ExitStack
from typing import TextIO

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from ..core.errors import AgentError
from ..settings.environment import ENV_PREFIX, OTHER_ENV_VARIABLES
from ..settings.sections import Settings

#: ``--poll-interval`` bounds: the agent's floor, and the longest that still shows a change within a minute
MIN_POLL_INTERVAL_S = 0.1
MAX_POLL_INTERVAL_S = 5.0
#: how long the demo waits for what it shows: this, plus :data:`POLLS_WAITED` poll intervals
BASE_DEADLINE_S = 50.0
#: the polls the show waits through at most: the first, the change's confirmation (change_persist_polls: 2),
#: the alerts after it, and slack for a slow machine
POLLS_WAITED = 6


class DemoOptionError(AgentError, ValueError):
    """An option the demo cannot honour: one line naming it (exit 2)."""


class DemoFailed(AgentError, RuntimeError):
    """The demo did not see what it shows (exit 1): the agent's log says why."""


class DemoSettings(Settings):
    """The demo agent's settings: the values given, and nothing from the environment."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def check_poll_interval(poll_interval_s: float) -> None:
    """:class:`DemoOptionError` unless ``--poll-interval`` is one the show can run with."""
    if not (math.isfinite(poll_interval_s) and MIN_POLL_INTERVAL_S <= poll_interval_s <= MAX_POLL_INTERVAL_S):
        raise DemoOptionError(
            f"--poll-interval: {MIN_POLL_INTERVAL_S:g} to {MAX_POLL_INTERVAL_S:g} seconds "
            f"(the demo shows a change within a minute), got {poll_interval_s:g}"
        )


def deadline_s(poll_interval_s: float) -> float:
    """How long the demo waits for the agent's cycles it shows."""
    return BASE_DEADLINE_S + POLLS_WAITED * poll_interval_s


def open_log(log_file: str | None, stack: ExitStack) -> tuple[TextIO, str]:
    """The agent log's stream and where it goes (``-``: stderr; None: a new file in the temp directory);
    :class:`DemoOptionError` naming ``--log-file`` when it cannot be written."""
    if log_file == "-":
        return sys.stderr, "stderr"
    if log_file is None:
        fd, path = tempfile.mkstemp(prefix="rackplan-demo-", suffix=".log")
        return stack.enter_context(os.fdopen(fd, "w", encoding="utf-8")), path
    try:
        return stack.enter_context(open(log_file, "w", encoding="utf-8")), log_file
    except OSError as e:
        raise DemoOptionError(f"--log-file {log_file}: {e.strerror or type(e).__name__}") from None


def ignored_variables() -> list[str]:
    """The ``RACKPLAN_*`` settings variables set here, which the demo does not read."""
    return sorted(
        name
        for name in os.environ
        if name.upper().startswith(ENV_PREFIX) and name[len(ENV_PREFIX) :].lower() not in OTHER_ENV_VARIABLES
    )
