"""The JSON Schemas of the control topics' record values, generated from :mod:`rackplan.agent.protocol.models`.

The files next to this module ship in the package (``importlib.resources``:
:func:`load`); docs/ holds identical copies.  Regenerate both after changing a
model::

    python -m rackplan.agent.protocol.schemas --write      # or: make schemas

``python -m rackplan.agent.protocol.schemas`` (no option) only checks and
exits 1 when a file differs from what the models generate; tests do the same.
Output is deterministic: the models' field order, two-space indentation,
UTF-8, one trailing newline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from ..models import AlertValue, HeartbeatValue, PlanValue, RegistrationValue

DIALECT = "https://json-schema.org/draft/2020-12/schema"


@dataclass(frozen=True, slots=True)
class SchemaFile:
    """One schema file: its name, the type it is generated from, and what the models cannot say."""

    name: str
    source: Any
    id: str
    title: str
    description: str | None = None


REGISTRATION_DESCRIPTION = (
    "Value of a record on the registrations topic (compacted). Key (UTF-8): consumer/<group_id>/<member_id> "
    "for a consumer group member, streams/<application_id>/<process_id> for a Kafka Streams client, with '%' "
    "and '/' inside an id written '%25' and '%2F'; it must equal the ids in the value. A null value "
    "(tombstone) removes the entry. An entry expires registrations.ttl_s after the record's broker timestamp "
    "(or timestamp_ms when that is older; a timestamp more than registrations.max_clock_skew_s in the future "
    "counts as the record's arrival): clients re-publish to stay registered. A value is at most 1 MiB, nests "
    "at most 64 levels and names at most 10,000 topics (a member's topics, or an app's sub-topology topics "
    "together). Fields not listed are ignored. The agent also checks what a schema cannot: the contract's "
    "rules for consumer_group members and streams_app clients (docs/agent.md, 'Registrations')."
)

FILES = (
    SchemaFile(
        "alert-schema.json",
        AlertValue,
        "https://rackplan.invalid/schemas/alert-1.json",
        AlertValue.model_config["title"] or "",
    ),
    SchemaFile(
        "lease-schema.json",
        HeartbeatValue,
        "https://rackplan.invalid/schemas/lease-heartbeat-1.json",
        HeartbeatValue.model_config["title"] or "",
    ),
    SchemaFile(
        "plan-schema.json",
        PlanValue,
        "https://rackplan.invalid/schemas/plan-record-1.json",
        PlanValue.model_config["title"] or "",
    ),
    SchemaFile(
        "registration-schema.json",
        RegistrationValue,
        "https://rackplan.invalid/schemas/registration-1.json",
        "rackplan registration record value (schema 1)",
        REGISTRATION_DESCRIPTION,
    ),
)


class _Generator(GenerateJsonSchema):
    """Pydantic's generator with unions as ``oneOf`` (the alternatives of a record exclude each other)."""

    def union_schema(self, schema: core_schema.UnionSchema) -> JsonSchemaValue:
        out = super().union_schema(schema)
        if "anyOf" in out:
            out["oneOf"] = out.pop("anyOf")
        return out


def _tidy(node: Any, mapping: bool = False) -> Any:
    """Drop pydantic's per-field ``title`` and ``default`` (no reader needs them); recurse into sub-schemas."""
    if isinstance(node, list):
        return [_tidy(x) for x in node]
    if not isinstance(node, dict):
        return node
    if mapping:  # ``properties`` / ``$defs``: names -> schemas
        return {k: _tidy(v) for k, v in node.items()}
    return {
        k: _tidy(v, mapping=k in ("properties", "$defs", "patternProperties"))
        for k, v in node.items()
        if k not in ("title", "default")
    }


def generate(spec: SchemaFile) -> dict[str, Any]:
    """The schema document of one file, as a JSON-ready dict."""
    body = TypeAdapter(spec.source).json_schema(by_alias=True, schema_generator=_Generator, mode="validation")
    description = spec.description or body.get("description")
    body = _tidy(body)
    body.pop("description", None)
    head: dict[str, Any] = {"$schema": DIALECT, "$id": spec.id, "title": spec.title}
    if description:
        head["description"] = description
    defs = body.pop("$defs", None)
    return {**head, **body, **({} if defs is None else {"$defs": defs})}


def render(spec: SchemaFile) -> str:
    """The file's text: deterministic (same models, same bytes)."""
    return json.dumps(generate(spec), indent=2, ensure_ascii=False) + "\n"


def load(name: str) -> dict[str, Any]:
    """A shipped schema file (e.g. ``plan-schema.json``), read from the installed package."""
    doc: dict[str, Any] = json.loads(resources.files(__name__).joinpath(name).read_text(encoding="utf-8"))
    return doc
