"""``rackplan agent run`` and ``rackplan demo``: registered by the command's parser, :mod:`rackplan.parser`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from pydantic import ValidationError

from .core.ports import Logger
from .kafka.errors import librdkafka_config_error
from .runtime.signals import install_stop_handlers


def register(sub: Any) -> None:
    """Add the agent's subcommands to the ``rackplan`` parser."""
    agent = sub.add_parser("agent", help="the sidecar agent")
    agent_sub = agent.add_subparsers(dest="agent_command", required=True)
    run = agent_sub.add_parser("run", help="run until SIGTERM / SIGINT")
    run.add_argument(
        "--config",
        default=os.environ.get("RACKPLAN_CONFIG"),
        help="settings YAML file (default: $RACKPLAN_CONFIG; without one, settings come from RACKPLAN_* variables)",
    )
    run.add_argument(
        "--no-supervisor",
        action="store_true",
        help="run the agent in this process, without the supervisor that restarts it after a native crash",
    )
    run.set_defaults(func=cmd_agent_run)

    check = sub.add_parser(
        "check",
        help="one observe-only cycle: brokers, racks, groups and the plans they would get; nothing written",
        description="Validate the settings, reach the brokers, and run one cycle of the agent in observe mode: "
        "creates no topic, publishes nothing, joins no group. Exit 0: fine; 1: a problem found; 2: bad settings "
        "or unreachable brokers.",
    )
    check.add_argument(
        "--config",
        default=os.environ.get("RACKPLAN_CONFIG"),
        help="settings YAML file (default: $RACKPLAN_CONFIG)",
    )
    check.add_argument("--json", action="store_true", help="print the findings as one JSON document")
    check.set_defaults(func=cmd_check)

    from .runtime.plans_cli import register as register_plans  # `rackplan plans ...` (issue 28)

    register_plans(sub)

    demo = sub.add_parser(
        "demo",
        help="embedded 3-rack cluster: detect a change, republish plans, alert",
        description="The agent against an embedded 3-rack cluster (librdkafka's mock): a broker decommissioned, "
        "plans republished, alerts sent. A fixed show: its agent's settings are its own, and RACKPLAN_* "
        "variables are not read (the summary names any that are set).",
    )
    demo.add_argument("--keep-running", action="store_true", help="keep the agent running after the summary")
    demo.add_argument(
        "--poll-interval", type=float, default=0.5, help="seconds between polls, 0.1 to 5 (default 0.5)"
    )
    demo.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    demo.add_argument(
        "--log-file",
        default=None,
        help="where the agent's log goes (JSON lines); '-' for stderr. Default: a file in the temp directory",
    )
    demo.set_defaults(func=cmd_demo)


def cmd_agent_run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException
    from pydantic_settings import SettingsError as SourceError

    from .core.errors import CannotRun
    from .core.logging import configure, get_logger
    from .kafka.exceptions import PublishError
    from .runtime.loop import Agent
    from .runtime.malloc_arenas import fix_mmap_threshold, limit_arenas
    from .runtime.supervisor import child_command, supervise, supervised
    from .settings.errors import describe_error, describe_errors
    from .settings.sections import Settings

    try:
        settings = Settings.load(args.config)
    except (OSError, ValueError, ValidationError, SourceError) as e:
        for line in describe_errors(e, Settings):  # every problem of the file at once, one line each
            print(f"rackplan: error: settings: {line}", file=sys.stderr)
        return 2
    configure(settings.log.format, settings.log.level)
    log = get_logger("rackplan.agent")
    if not args.no_supervisor and not supervised():
        argv = ["agent", "run", *(["--config", args.config] if args.config else [])]
        return supervise(child_command(argv), get_logger("rackplan.supervisor"))
    log.info(
        "agent starting",
        settings=settings.redacted(),
        malloc_arenas=limit_arenas(),
        malloc_mmap_threshold=fix_mmap_threshold(),
    )
    try:
        agent = Agent(settings, serve_http=True)
    except ValueError as e:  # a secret file that cannot be read (SettingsError)
        return _settings_failed(log, describe_error(e))
    except KafkaException as e:  # librdkafka refuses kafka.config (an unknown property, a bad value)
        return _settings_failed(log, librdkafka_config_error(e, settings.kafka.client_config()))
    install_stop_handlers(agent.stop)
    try:
        return agent.run()
    except CannotRun as e:  # the cluster is not set up as the settings say: the operator's to fix
        log.error("agent cannot run", error=str(e))
        print(f"rackplan: error: {e}", file=sys.stderr)
        return 2
    except PublishError as e:  # the plan topic cannot be read back: the cluster's state, not the settings
        log.error("agent cannot run", error=str(e))
        print(f"rackplan: error: {e}", file=sys.stderr)
        return 1


def cmd_check(args: argparse.Namespace) -> int:
    import json

    from confluent_kafka import KafkaException
    from pydantic_settings import SettingsError as SourceError

    from .core.errors import CannotRun
    from .core.logging import configure
    from .runtime.check import run_check
    from .runtime.check_text import render
    from .settings.errors import describe_error, describe_errors
    from .settings.sections import Settings

    try:
        settings = Settings.load(args.config)
    except (OSError, ValueError, ValidationError, SourceError) as e:
        for line in describe_errors(e, Settings):  # as `agent run`: each problem, with its "did you mean"
            print(f"rackplan: error: settings: {line}", file=sys.stderr)
        return 2
    configure(settings.log.format, "error", stream=sys.stderr)  # stdout holds the findings only
    try:
        found = run_check(settings)
    except ValueError as e:  # a secret file that cannot be read (SettingsError)
        print(f"rackplan: error: settings: {describe_error(e)}", file=sys.stderr)
        return 2
    except KafkaException as e:
        print(
            f"rackplan: error: settings: {librdkafka_config_error(e, settings.kafka.client_config())}",
            file=sys.stderr,
        )
        return 2
    except CannotRun as e:
        print(f"rackplan: error: {e}", file=sys.stderr)
        return 2
    doc = found.as_json()
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n" if args.json else render(doc))
    return 0 if doc["ok"] else 1


def _settings_failed(log: Logger, message: str) -> int:
    log.error("agent cannot run", error=message)
    print(f"rackplan: error: settings: {message}", file=sys.stderr)
    return 2


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo.options import DemoFailed, DemoOptionError
    from .demo.run import run_demo

    try:
        return run_demo(
            poll_interval_s=args.poll_interval,
            keep_running=args.keep_running,
            log_level=args.log_level,
            log_file=args.log_file,
        )
    except DemoOptionError as e:  # refused before anything started: the option named
        print(f"rackplan: error: demo: {e}", file=sys.stderr)
        return 2
    except DemoFailed as e:  # the agent did not do what the demo shows: its log says why
        print(f"rackplan: error: demo: {e}", file=sys.stderr)
        return 1
