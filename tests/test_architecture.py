"""The architecture of docs/architecture.md, checked: layers, no cycles, one import name, a pure assignor."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.architecture import (
    AGENT_RANKS,
    Module,
    agent_unit,
    cycles,
    function_sizes,
    imports,
    module_sizes,
    modules,
    rank_violations,
    ratchet,
    report,
    unit_cycles,
    unranked_units,
    upward_imports,
)

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
    parser = KNOWN["rackplan.parser"]
    assert {"rackplan.agent.commands", "rackplan.fleet.commands", "rackplan.assignor.cli"} <= set(
        imports(parser, KNOWN)
    )
    assert {"rackplan.parser", "rackplan.assignor.cli"} <= set(imports(KNOWN["rackplan.cli"], KNOWN))


def test_the_bare_folder_names_are_not_importable_as_packages() -> None:
    # One copy of each module: ``import agent`` from the source tree's root fails loudly.
    r = subprocess.run(
        [sys.executable, "-c", "import agent"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 1 and "import rackplan.agent, not agent" in r.stderr, r.stderr


def test_every_agent_unit_has_a_rank() -> None:
    # A new sub-package (or top-level module) of the agent must say where it stands in AGENT_RANKS.
    assert unranked_units(KNOWN, AGENT_RANKS) == []
    assert not AGENT_RANKS.keys() - {u for n in KNOWN if (u := agent_unit(n)) is not None}, "stale rank"


def test_no_agent_unit_imports_one_of_its_rank_or_above() -> None:
    assert rank_violations(KNOWN, AGENT_RANKS) == []


def test_no_cycles_between_agent_units() -> None:
    assert unit_cycles(KNOWN) == []


def test_the_rank_check_sees_an_upward_import_lazy_or_not() -> None:
    # The rank check is only as good as its reading: a lazy import from a low unit into a higher one
    # (settings -> runtime) and one between two units of the same rank (core <-> metrics) are both found.
    def module(name: str, source: str) -> Module:
        return Module(name, ROOT / (name.replace(".", "/") + ".py"), ast.parse(source), 1)

    fake = {
        **{n: KNOWN[n] for n in ("rackplan.agent.runtime.loop", "rackplan.agent.metrics.registry")},
        "rackplan.agent.settings.x": module(
            "rackplan.agent.settings.x", "def f():\n    from ..runtime import loop\n"
        ),
        "rackplan.agent.core.y": module(
            "rackplan.agent.core.y", "from rackplan.agent.metrics.registry import M\n"
        ),
    }
    assert rank_violations(fake, AGENT_RANKS) == [
        ("rackplan.agent.core.y", "rackplan.agent.metrics.registry"),
        ("rackplan.agent.settings.x", "rackplan.agent.runtime.loop"),
    ]
    assert unit_cycles(fake) == []


def test_the_docs_rank_table_is_agent_ranks() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## The agent's sub-packages, by rank", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| `")]
    table = {
        cells[1].strip().strip("`").removesuffix("/").removesuffix(".py"): int(cells[-2]) for cells in rows
    }
    assert table == AGENT_RANKS


# ---- the size ratchet: no new module over 500 lines, no new function over 60 ------------------------------

MODULE_LIMIT = 500
FUNCTION_LIMIT = 60

#: Today's offenders, with their size: each may shrink, never grow, and must be taken off once within the
#: limit (the test says so), so these lists only get shorter.
LONG_MODULES: dict[str, int] = {
    "rackplan.assignor.streams.rack": 515,
    "rackplan.fleet.job": 527,
    "rackplan.fleet.units": 588,
}
LONG_FUNCTIONS: dict[str, int] = {
    "rackplan.agent.demo.run:demo_settings": 65,
    "rackplan.agent.demo.run:run_demo": 105,
    "rackplan.agent.kafka.publisher:Publisher._publish_on": 63,
    "rackplan.agent.protocol.registrations:decode_registration": 82,
    "rackplan.agent.runtime.startup_retry:retry_startup": 64,
    "rackplan.assignor.consumer.rack_optimal.balanced:_optimise": 105,
    "rackplan.assignor.consumer.rack_optimal.bytes_objective:assign_bytes": 120,
    "rackplan.assignor.consumer.rack_optimal.class_flow:_keep_most": 75,
    "rackplan.assignor.consumer.rack_optimal.class_flow:classify": 78,
    "rackplan.assignor.consumer.rack_optimal.load_balance:balance_by_load": 102,
    "rackplan.assignor.consumer.rack_optimal.milp:solve": 105,
    "rackplan.assignor.consumer.sticky.constrained:assign_constrained": 114,
    "rackplan.assignor.flow.mincost:_blocking_flows": 70,
    "rackplan.assignor.streams.rack:_solve_pooled": 84,
    "rackplan.assignor.streams.standby:_swap_between": 77,
    "rackplan.assignor.streams.standby:optimise_standbys": 66,
    "rackplan.assignor.streams.standby_flow:_build": 74,
    "rackplan.assignor.streams.standby_milp:place": 72,
    "rackplan.assignor.streams.tasks:build_model": 77,
    "rackplan.fleet.job:run_fleet": 65,
    "rackplan.fleet.local:run_local": 74,
    "rackplan.fleet.report:render": 64,
    "rackplan.fleet.synthetic:cluster_document": 77,
}


def test_no_module_grows_past_500_lines_unless_listed_and_shrinking() -> None:
    assert ratchet(module_sizes(KNOWN), LONG_MODULES, MODULE_LIMIT) == []


def test_no_function_grows_past_60_lines_unless_listed_and_shrinking() -> None:
    assert ratchet(function_sizes(KNOWN), LONG_FUNCTIONS, FUNCTION_LIMIT) == []


def test_the_ratchet_refuses_a_new_offender_growth_and_a_stale_entry() -> None:
    sizes = {"new": 61, "grew": 90, "shrank": 70, "fixed": 40}
    allowed = {"grew": 80, "shrank": 75, "fixed": 65, "gone": 100}
    assert ratchet(sizes, allowed, 60) == [
        "grew: 90 lines, grew past its allowed 80",
        "new: 61 lines, over 60",
        "fixed: 40, within 60: take it off the list",
        "gone: gone, within 60: take it off the list",
    ]


def test_function_sizes_name_methods_and_nested_functions_apart() -> None:
    tree = ast.parse("class A:\n    def f(self):\n        pass\n\n\ndef f():\n    def g():\n        pass\n")
    sizes = function_sizes({"m": Module("m", ROOT / "m.py", tree, 8)})
    assert sizes == {"m:A.f": 2, "m:f": 3, "m:f.g": 2}


# ---- the numbers docs/architecture.md prints are the measure's ----------------------------------------------


def test_the_docs_numbers_are_what_python_m_tests_architecture_prints() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    marker = "```text\n$ python -m tests.architecture\n"
    assert marker in text, "docs/architecture.md quotes the command's output"
    quoted = text.split(marker, 1)[1].split("```", 1)[0]
    assert quoted == report(ROOT) + "\n", "paste the output of: python -m tests.architecture"
