"""structlog setup: JSON lines in production, readable console output on a terminal.

librdkafka's own log lines are routed through the same pipeline (see
:func:`kafka_logger`), so an operator reads one stream in one format.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def use_json(fmt: str, stream: TextIO) -> bool:
    """``auto`` means console on a TTY, JSON everywhere else (containers, pipes, files)."""
    if fmt == "json":
        return True
    if fmt == "console":
        return False
    isatty = getattr(stream, "isatty", None)
    return not (callable(isatty) and isatty())


def configure(fmt: str = "auto", level: str = "info", stream: TextIO | None = None) -> None:
    """Configure structlog and the stdlib root logger to write to ``stream`` (stdout by default)."""
    out = stream if stream is not None else sys.stdout
    lvl = _LEVELS.get(level, logging.INFO)
    renderer: Any = (
        structlog.processors.JSONRenderer(sort_keys=True)
        if use_json(fmt, out)
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    # stdlib records (librdkafka through confluent-kafka's ``logger`` option) use the same renderer.
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
        )
    )
    root = logging.getLogger("rackplan")
    root.handlers[:] = [handler]
    root.setLevel(lvl)
    root.propagate = False


def kafka_logger() -> logging.Logger:
    """The stdlib logger to pass as confluent-kafka's ``logger`` config."""
    return logging.getLogger("rackplan.librdkafka")


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
