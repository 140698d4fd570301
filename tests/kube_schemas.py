"""Kubernetes JSON Schemas for kubeconform, made from what Go modules ship (``make k8s-tools``).

kubeconform reads one JSON Schema per kind and by default downloads them from a
GitHub repository; this project's machines reach package registries only. So the
schemas are made here from two sources the Go module proxy serves:

* the core kinds from Kubernetes' own OpenAPI document, ``api/openapi-spec/swagger.json``
  of the ``k8s.io/kubernetes`` module (the version is ``K8S_VERSION`` in the Makefile);
* the Prometheus Operator's kinds (``monitoring.coreos.com/v1``) from the CRDs that
  ``controller-gen`` (sigs.k8s.io/controller-tools) generates from the operator's Go types
  (module ``github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring``), as
  the operator's own build does.

Every schema is made *strict*: an object whose properties are listed refuses any other
key, so a misspelt field (``readinesProbe``) fails validation instead of being dropped by
the API server. Kubernetes' ``int-or-string`` fields and quantities take an integer or a
string, as the API server does. Files are laid out as kubeconform's
``-schema-location 'DIR/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json'``
finds them (``.Group`` is ``v1`` for the core group).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

#: (group, version, kind) of every kind the chart renders; a kind missing here fails kubeconform
#: (it runs without -ignore-missing-schemas), so a new kind in the chart is noticed.
CORE_KINDS: tuple[tuple[str, str, str], ...] = (
    ("", "v1", "ConfigMap"),
    ("", "v1", "Secret"),
    ("", "v1", "Service"),
    ("", "v1", "ServiceAccount"),
    ("apps", "v1", "Deployment"),
    ("policy", "v1", "PodDisruptionBudget"),
)
CRD_KINDS: tuple[str, ...] = ("PodMonitor", "ServiceMonitor", "PrometheusRule")

#: how kubeconform finds a file of :func:`schema_path` under the output directory
LOCATION = "{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json"

_INT_OR_STRING = {"oneOf": [{"type": "string"}, {"type": "integer"}]}
_NUMBER_OR_STRING = {"oneOf": [{"type": "string"}, {"type": "number"}]}
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING_DEF = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"


def schema_path(group: str, version: str, kind: str) -> str:
    """The file of one kind, relative to the schema directory (see :data:`LOCATION`)."""
    return f"{group or version}/{kind.lower()}_{version}.json"


def strict(node: Any) -> Any:
    """``node`` with every listed object closed to unknown keys and int-or-string fields widened."""
    if isinstance(node, list):
        return [strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    if node.get("x-kubernetes-int-or-string") is True or node.get("format") == "int-or-string":
        rest = {
            k: v
            for k, v in node.items()
            if k not in ("type", "format", "anyOf", "x-kubernetes-int-or-string")
        }
        return {**rest, **_INT_OR_STRING}
    out = {k: strict(v) for k, v in node.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _refs(node: Any) -> Iterable[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/definitions/"):
            yield ref.removeprefix("#/definitions/")
        for v in node.values():
            yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def core_schema(definitions: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The definition ``name`` with the definitions it reaches, in one self-contained schema."""
    reached: dict[str, Any] = {}
    todo = [name]
    while todo:
        n = todo.pop()
        if n in reached:
            continue
        if n not in definitions:
            raise KeyError(f"the OpenAPI document has no definition {n}")
        d = definitions[n]
        if n == _QUANTITY:
            d = {"description": d.get("description", ""), **_NUMBER_OR_STRING}
        reached[n] = d
        todo.extend(_refs(d))
    root = strict(definitions[name])
    return {**root, "definitions": {n: strict(d) for n, d in sorted(reached.items())}}


def core_schemas(swagger: Mapping[str, Any], kinds: Iterable[tuple[str, str, str]]) -> dict[str, Any]:
    """Relative path -> schema of each of ``kinds``, found by its group-version-kind in ``swagger``."""
    definitions: Mapping[str, Any] = swagger["definitions"]
    by_gvk = {
        (g["group"], g["version"], g["kind"]): name
        for name, d in definitions.items()
        for g in d.get("x-kubernetes-group-version-kind", ())
    }
    out = {}
    for gvk in kinds:
        if gvk not in by_gvk:
            raise KeyError(f"the OpenAPI document has no kind {'/'.join(filter(None, gvk))}")
        out[schema_path(*gvk)] = core_schema(definitions, by_gvk[gvk])
    return out


def crd_schemas(crds: Iterable[Mapping[str, Any]], kinds: Iterable[str]) -> dict[str, Any]:
    """Relative path -> schema of each served version of each CRD whose kind is in ``kinds``."""
    wanted, out = set(kinds), {}
    for crd in crds:
        if crd.get("kind") != "CustomResourceDefinition":
            continue
        spec = crd["spec"]
        kind = spec["names"]["kind"]
        if kind not in wanted:
            continue
        wanted.discard(kind)
        for version in spec["versions"]:
            if version.get("served", True):
                schema = version["schema"]["openAPIV3Schema"]
                out[schema_path(spec["group"], version["name"], kind)] = strict(schema)
    if wanted:
        raise KeyError(f"no CRD for {', '.join(sorted(wanted))}")
    return out


def write(schemas: Mapping[str, Any], out: Path) -> None:
    for rel, schema in schemas.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(schema, sort_keys=True, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--swagger", type=Path, help="Kubernetes' api/openapi-spec/swagger.json: the core kinds")
    p.add_argument(
        "--crds", type=Path, help="directory of controller-gen's CRD YAML files: the operator's kinds"
    )
    p.add_argument("--out", type=Path, required=True, help="schema directory (kubeconform -schema-location)")
    args = p.parse_args(argv)
    if args.swagger is None and args.crds is None:
        p.error("--swagger or --crds (or both)")
    schemas: dict[str, Any] = {}
    if args.swagger is not None:
        schemas |= core_schemas(json.loads(args.swagger.read_text()), CORE_KINDS)
    if args.crds is not None:
        files = sorted(args.crds.glob("*.yaml"))
        schemas |= crd_schemas([d for f in files for d in yaml.safe_load_all(f.read_text()) if d], CRD_KINDS)
    write(schemas, args.out)
    print(f"{len(schemas)} schemas in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
