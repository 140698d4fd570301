"""``rackplan plans list|show|explain|diff``: the plans of record, read from the plan topic, inspected.

The commands put the pieces together and print: :class:`~.plans_io.PlansReader` reads,
:mod:`.plans_record`, :mod:`.plans_explain` and :mod:`.plans_diff` decide, :mod:`.plans_text`
renders (``--json`` prints the document itself).  Exit 0: fine; 1: a problem (no plan of record,
a refused record, a live assignment off its plan, a topic or group the brokers would not give);
2: bad input (settings, the group name, unreachable brokers), one line naming it, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .plans_io import LiveSource, PlansReader
    from .plans_record import KeyHistory

EXIT_PROBLEM = 1
EXIT_BAD_INPUT = 2


def register(sub: Any) -> None:
    """Add ``rackplan plans`` and its subcommands to the ``rackplan`` parser."""
    plans = sub.add_parser(
        "plans",
        help="the plans of record on the plan topic: list, show, explain, diff against the live group",
        description="Read the plan topic directly (as followers do: MAC and schema checked) and show the plans "
        "of record. Needs only read access; no agent needs to run. Exit 0: fine; 1: a problem; 2: bad input.",
    )
    plans_sub = plans.add_subparsers(dest="plans_command", required=True)
    what = {
        "list": "every key on the plan topic: generation, epoch, when, why, cross-rack partitions",
        "show": "one group's plan of record: generation, epoch, when, reason, stats, assignment",
        "explain": "which partitions of the plan are cross-rack and why (a Streams app's per task and role); "
        "what no assignment can fix",
        "diff": "the plan against the group's live assignment (DescribeConsumerGroups)",
    }
    for name, text in what.items():
        p = plans_sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        if name != "list":
            p.add_argument("group", help="consumer/<group>, streams/<app>, or a bare consumer group id")
        p.add_argument(
            "--config",
            default=os.environ.get("RACKPLAN_CONFIG"),
            help="settings YAML file (default: $RACKPLAN_CONFIG): Kafka, plan_topic, the secret",
        )
        p.add_argument("--json", action="store_true", help="print one JSON document")
        p.set_defaults(func=lambda args, name=name: cmd_plans(args, name))


def _err(message: str, code: int) -> int:
    from .plans_text import printable

    print(f"rackplan: error: {printable(message)}", file=sys.stderr)  # it may quote a record: escaped
    return code


def cmd_plans(args: argparse.Namespace, command: str, live: LiveSource | None = None) -> int:
    """Load the settings, read, decide, print; every failure is one line and an exit code."""
    from confluent_kafka import KafkaException
    from pydantic import ValidationError
    from pydantic_settings import SettingsError as SourceError

    from ..cluster.metadata import MetadataError
    from ..core.errors import CannotRun
    from ..core.logging import configure
    from ..kafka.errors import librdkafka_config_error
    from ..protocol.plans import PlanDecodeError
    from ..settings.errors import describe_error
    from ..settings.sections import Settings
    from .plans_io import PlansProblem, PlansReader
    from .plans_record import resolve_key

    try:  # the argument first: a bad one needs no settings, no broker and no plan topic read
        if command != "list":
            resolve_key(args.group, ())
    except PlanDecodeError as e:
        return _err(f"GROUP: {e}", EXIT_BAD_INPUT)
    try:
        settings = Settings.load(args.config)
        configure(settings.log.format, "error", stream=sys.stderr)  # stdout holds the answer only
        reader = PlansReader(settings, live=live)
    except (OSError, ValueError, ValidationError, SourceError) as e:
        return _err(f"settings: {describe_error(e, Settings)}", EXIT_BAD_INPUT)
    except KafkaException as e:  # librdkafka refuses kafka.config
        return _err(f"settings: {librdkafka_config_error(e, settings.kafka.client_config())}", EXIT_BAD_INPUT)
    try:
        doc, ok, text = COMMANDS[command](reader, getattr(args, "group", ""))
    except PlanDecodeError as e:
        return _err(f"GROUP: {e}", EXIT_BAD_INPUT)
    except CannotRun as e:
        return _err(str(e), EXIT_BAD_INPUT)
    except (PlansProblem, MetadataError) as e:
        return _err(str(e), EXIT_PROBLEM)
    # allow_nan=False: the decoder refuses a record with a non-finite number, so --json is always JSON
    sys.stdout.write(
        json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n" if args.json else text(doc)
    )
    return 0 if ok else EXIT_PROBLEM


Outcome = tuple[dict[str, Any], bool, Callable[[dict[str, Any]], str]]


def do_list(reader: PlansReader, _group: str) -> Outcome:
    from .plans_record import topic_json
    from .plans_text import render_list

    doc = topic_json(reader.plans(), reader.secret is not None)
    return doc, doc["ok"], render_list


def do_show(reader: PlansReader, group: str) -> Outcome:
    from .plans_record import KeyHistory, key_json, resolve_key
    from .plans_text import render_show

    found = reader.plans()
    key = resolve_key(group, found.keys)
    doc = key_json(found.keys.get(key) or KeyHistory(key))
    return doc, doc["ok"], render_show


def _plan_of_record(reader: PlansReader, group: str, streams: bool = False) -> tuple[str, Any]:
    """The key and plan of record of a consumer group (or, with ``streams``, of a Streams app too);
    :class:`PlansProblem` when there is none."""
    from ..protocol.plans import PlanDecodeError
    from .plans_io import PlansProblem
    from .plans_record import resolve_key

    found = reader.plans()
    key = resolve_key(group, found.keys)
    if not streams and not key.startswith("consumer/"):
        raise PlanDecodeError(
            f"{key} is a Streams app: diff takes a consumer group (a Streams group's live members hold "
            "partitions per stream thread, not tasks); explain takes both"
        )
    history = found.keys.get(key)
    if history is None or history.plan is None:
        raise PlansProblem(f"{key}: no plan of record ({_why_none(history)})")
    return key, history.plan


def _why_none(history: KeyHistory | None) -> str:
    """Why a key has no plan of record, as ``plans show`` says it: tombstoned, its records refused (where
    and why), or none written."""
    if history is None:
        return "none on the plan topic"
    refused = [
        (f"partition {s.partition} offset {s.offset}", f"{s.reason}: {s.detail}") for s in history.refused
    ]
    if len(refused) == 1:
        said = f"the record at {refused[0][0]} was refused: {refused[0][1]}"
    else:
        said = f"{len(refused)} records refused: " + "; ".join(f"{at}: {why}" for at, why in refused)
    if history.tombstoned:
        return "tombstoned" + (f"; {said}" if refused else "")
    return said if refused else "none on the plan topic"


def do_explain(reader: PlansReader, group: str) -> Outcome:
    from .plans_explain import explain
    from .plans_io import PlansProblem, racks_of
    from .plans_text import render_explain

    key, rec = _plan_of_record(reader, group, streams=True)
    if key.startswith("streams/"):
        return _explain_streams(reader, key, rec)
    assignment = rec.body["assignment"]
    snap, racks = reader.metadata()
    real = None
    try:
        real = reader.group(rec.body["group_id"])
    except PlansProblem as e:  # racks then come from the registrations alone
        reader.notes.append(str(e))
    reg = reader.registration(key, real)
    planned_racks, live_racks = racks_of(reg, real, assignment, reader.settings)
    # every member's rack is the group's, the plan's members or not (registered after it, or live)
    found = explain(assignment, {**live_racks, **planned_racks}, snap, racks, rec.fetch_mode)
    doc = {"key": key, "generation": rec.generation, **found.as_json(), "notes": list(reader.notes)}
    return doc, True, render_explain


def _explain_streams(reader: PlansReader, key: str, rec: Any) -> Outcome:
    """``explain`` of a Streams app: its tasks' topic partitions judged, with the registration's sub-topologies
    and client racks (a Streams plan names tasks; only the registration says what they read)."""
    from rackplan.assignor import subtopologies_of

    from ..groups.live import registered_members
    from .plans_explain import explain_streams
    from .plans_io import PlansProblem
    from .plans_text import render_explain

    reg = reader.registration(key)
    subtopologies = subtopologies_of(reg.spec) if reg is not None else {}
    if reg is None or not subtopologies:
        raise PlansProblem(
            f"{key}: no registration (settings file or registrations topic) gives its sub-topologies, "
            "so its tasks' partitions are not known"
        )
    client_racks = {str(c.get("process_id")): c.get("rack") for c in registered_members(reg)}
    snap, racks = reader.metadata()
    found = explain_streams(rec.body["assignment"], subtopologies, client_racks, snap, racks, rec.fetch_mode)
    doc = {"key": key, "generation": rec.generation, **found.as_json(), "notes": list(reader.notes)}
    return doc, True, render_explain


def do_diff(reader: PlansReader, group: str) -> Outcome:
    from .plans_diff import plan_diff
    from .plans_io import racks_of
    from .plans_text import render_diff

    key, rec = _plan_of_record(reader, group)
    assignment = rec.body["assignment"]
    real = reader.group(rec.body["group_id"])
    snap, racks = reader.metadata()
    reg = reader.registration(key, real)
    planned_racks, live_racks = racks_of(reg, real, assignment, reader.settings)
    found = plan_diff(assignment, real, planned_racks, live_racks, snap, racks, rec.fetch_mode)
    doc = {"key": key, "generation": rec.generation, **found.as_json()}
    doc["notes"] = [*doc["notes"], *reader.notes]
    return doc, found.in_step, render_diff


COMMANDS: dict[str, Callable[[PlansReader, str], Outcome]] = {
    "list": do_list,
    "show": do_show,
    "explain": do_explain,
    "diff": do_diff,
}
