"""The architecture of docs/architecture.md, checked: layers, no cycles, one import name, a pure assignor."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.architecture import cycles, imports, modules, upward_imports

ROOT = Path(__file__).resolve().parents[1]
KNOWN = modules(ROOT)

#: What the pure package may import from outside the project: the standard library's pure parts and
#: the solvers.  No Kafka client, no network, no settings, no logging framework.
ASSIGNOR_FORBIDDEN = (
    "confluent_kafka",
    "socket",
    "http",
    "urllib",
    "pydantic",
    "structlog",
    "yaml",
    "pyspark",
)


def test_the_tree_is_measured_under_one_import_name() -> None:
    assert {"rackplan.assignor", "rackplan.agent", "rackplan.fleet", "rackplan.cli"} <= KNOWN.keys()
    for link in ("agent", "assignor", "fleet"):
        path = ROOT / "rackplan" / link
        assert path.is_symlink() and path.resolve() == (ROOT / link).resolve(), link


def test_no_module_imports_a_layer_above_its_own() -> None:
    assert upward_imports(KNOWN) == []


def test_no_import_cycles() -> None:
    assert cycles(KNOWN) == []


def test_the_assignor_imports_no_kafka_client_no_io_framework() -> None:
    import ast

    bad = []
    for m in KNOWN.values():
        if m.layer != "assignor":
            continue
        for node in ast.walk(m.tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            bad += [(m.name, n) for n in names if n.split(".")[0] in ASSIGNOR_FORBIDDEN]
    assert bad == []


def test_the_measure_sees_lazy_and_relative_imports() -> None:
    # The cycle and layer checks are only as good as the import reader: a function-level relative
    # import must count (the old ``assignor.cli`` -> ``agent.commands`` was one).
    cli = KNOWN["rackplan.cli"]
    assert {"rackplan.agent.commands", "rackplan.fleet.commands", "rackplan.assignor.cli"} <= set(
        imports(cli, KNOWN)
    )


def test_the_bare_folder_names_are_not_importable_as_packages() -> None:
    # One copy of each module: ``import agent`` from the source tree's root fails loudly.
    r = subprocess.run(
        [sys.executable, "-c", "import agent"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 1 and "import rackplan.agent, not agent" in r.stderr, r.stderr
