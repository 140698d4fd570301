"""structlog setup: JSON lines in production, readable console output on a terminal.

librdkafka's own log lines are routed through the same pipeline (see
:func:`kafka_logger`), so an operator reads one stream in one format: every
client the agent makes gets that logger, and the embedded mock cluster's
handle logs through :func:`log_librdkafka`.  A librdkafka line becomes an event
whose text is the message, with ``facility`` and ``client`` fields.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

from .redact import mask_tree

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
KAFKA_LOGGER = "rackplan.librdkafka"
#: how confluent-kafka formats a librdkafka line: facility, client name, message
_RDKAFKA_FORMAT = "%s [%s] %s"
#: librdkafka prefixes a line with the thread that wrote it
_THREAD = re.compile(r"\[thrd:([^\]]*)\]: ")


def syslog_level(level: int) -> int:
    """librdkafka's syslog level (0 emergency .. 7 debug) as a stdlib level, as confluent-kafka maps it."""
    if level <= 2:
        return logging.CRITICAL
    return {3: logging.ERROR, 4: logging.WARNING, 5: logging.INFO, 6: logging.INFO}.get(level, logging.DEBUG)


def _librdkafka_fields(
    _logger: Any, _name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Split a librdkafka line into message, ``facility`` and ``client`` instead of one opaque string."""
    args = event_dict.pop("positional_args", None)
    record = event_dict.get("_record")
    if (
        isinstance(record, logging.LogRecord)
        and record.name == KAFKA_LOGGER
        and record.msg == _RDKAFKA_FORMAT
        and isinstance(args, tuple)
        and len(args) == 3
    ):
        facility, client, message = args
        text = str(message)
        thread = _THREAD.match(text)
        if thread is not None:
            event_dict["thread"] = thread.group(1)
            text = text[thread.end() :]
        event_dict["event"] = text
        event_dict["facility"] = str(facility)
        event_dict["client"] = str(client)
    return event_dict


def _mask_secrets(_logger: Any, _name: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Every event, whoever wrote it (our code, librdkafka, a library): secret-bearing values masked.

    The same rule as the settings logged at start (:func:`rackplan.agent.core.redact.mask_tree`):
    a field named like a secret is ``***``, URLs lose their credentials and
    query values, ``clientSecret=...`` in any text becomes ``clientSecret=***``.
    """
    for k, v in list(event_dict.items()):
        if not k.startswith("_"):
            event_dict[k] = mask_tree(v, k)
    return event_dict


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
        processors=[*shared, structlog.processors.format_exc_info, _mask_secrets, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    # stdlib records (librdkafka through confluent-kafka's ``logger`` option) use the same renderer.
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, _mask_secrets, renderer],
            foreign_pre_chain=[structlog.stdlib.add_logger_name, _librdkafka_fields, *shared],
            pass_foreign_args=True,
        )
    )
    root = logging.getLogger("rackplan")
    root.handlers[:] = [handler]
    root.setLevel(lvl)
    root.propagate = False


def log_fd() -> int | None:
    """The file descriptor the process's log stream (:func:`configure`'s) writes to; None when it is not a
    file (a test's buffer) or logging was never configured.

    A child process the agent starts (the isolated describe worker) logs there too: inheriting stdout,
    its librdkafka lines landed in ``rackplan demo``'s story while the demo's own log went to its file.
    """
    for handler in logging.getLogger("rackplan").handlers:
        stream = getattr(handler, "stream", None)
        fileno = getattr(stream, "fileno", None)
        if callable(fileno):
            try:
                fd = fileno()
            except (OSError, ValueError):
                return None
            return fd if isinstance(fd, int) else None
    return None


def kafka_logger() -> logging.Logger:
    """The stdlib logger to pass as confluent-kafka's ``logger`` config."""
    return logging.getLogger(KAFKA_LOGGER)


def with_kafka_logger(config: dict[str, Any]) -> dict[str, Any]:
    """A client config whose librdkafka logs go through structlog (served by the client's poll calls)."""
    return {**config, "logger": kafka_logger()}


def log_librdkafka(level: int, facility: str, client: str, message: str) -> None:
    """One librdkafka line (syslog ``level``) from a handle confluent-kafka does not own (the mock cluster)."""
    kafka_logger().log(syslog_level(level), _RDKAFKA_FORMAT, facility, client, message)


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
