"""The shape of the code, measured: layers, import cycles, sizes (docs/architecture.md).

``python -m tests.architecture [ROOT]`` prints the numbers docs/architecture.md
reports; :mod:`tests.test_architecture` asserts the rules.  Modules are read
with :mod:`ast` (nothing is imported), so a source tree of any age can be
measured: packages are found under ``ROOT/rackplan`` when it exists, else as
the bare top-level folders of older trees (``agent``, ``assignor``).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

#: The layers from the bottom up: a module may import its own layer and those below, never above.
LAYERS = ("assignor", "agent", "fleet", "parser", "cli")
FOLDERS = ("assignor", "agent", "fleet")

#: The agent's units (its sub-packages and top-level modules) by rank, from the bottom up: a unit imports
#: its own modules and units of a strictly lower rank, never one of its own rank or above
#: (docs/architecture.md has the table, with each unit's job).
AGENT_RANKS: dict[str, int] = {
    "core": 0,
    "protocol": 1,
    "metrics": 2,
    "kafka": 2,
    "settings": 3,
    "follower": 3,
    "cluster": 4,
    "planning": 5,
    "alerts": 5,
    "traffic": 5,
    "groups": 6,
    "state": 7,
    "ha": 8,
    "cycle": 9,
    "runtime": 10,
    "demo": 11,
    "commands": 12,
    "testing": 12,
    "testing_clients": 12,
}


@dataclass(frozen=True)
class Module:
    """One source file: its dotted name (``rackplan.agent.runtime.loop``), path and parsed tree."""

    name: str
    path: Path
    tree: ast.Module
    lines: int

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"

    @property
    def layer(self) -> str:
        parts = self.name.split(".")
        return parts[1] if len(parts) > 1 and parts[0] == "rackplan" else parts[0]


def modules(root: Path) -> dict[str, Module]:
    """Every module of the packages under ``root``, by dotted name (as imported)."""
    found: dict[str, Module] = {}
    prefix: tuple[str, ...] = ("rackplan",) if (root / "rackplan").is_dir() else ()
    for folder in FOLDERS:
        base = root / folder
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(root).with_suffix("").parts
            parts = (*prefix, *rel)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            text = path.read_text(encoding="utf-8")
            found[".".join(parts)] = Module(".".join(parts), path, ast.parse(text), len(text.splitlines()))
    for path in sorted((root / "rackplan").glob("*.py")) if prefix else []:
        parts = ("rackplan",) if path.stem == "__init__" else ("rackplan", path.stem)
        text = path.read_text(encoding="utf-8")
        found[".".join(parts)] = Module(".".join(parts), path, ast.parse(text), len(text.splitlines()))
    return found


def _absolute(module: Module, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.name.split(".")
    if not module.is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports(module: Module, known: dict[str, Module]) -> Iterator[str]:
    """The project modules ``module`` imports, anywhere in its body (lazy imports included)."""

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    for node in ast.walk(module.tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node)
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        for t in targets:
            hit = resolve(t)
            if hit is not None and hit != module.name:
                yield hit


def import_graph(known: dict[str, Module]) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(known)
    for m in known.values():
        g.add_edges_from((m.name, t) for t in imports(m, known))
    return g


def upward_imports(known: dict[str, Module]) -> list[tuple[str, str]]:
    """Imports from a lower layer into a higher one (``assignor`` -> ``agent``, ``agent`` -> ``fleet``...)."""
    rank = {name: i for i, name in enumerate(LAYERS)}
    bad = []
    for m in known.values():
        for t in set(imports(m, known)):
            src, dst = rank.get(m.layer, len(LAYERS)), rank.get(known[t].layer, len(LAYERS))
            if dst > src and known[t].name != "rackplan":
                bad.append((m.name, t))
    return sorted(bad)


def cycles(known: dict[str, Module]) -> list[list[str]]:
    """Strongly connected components of more than one module, a package's ``__init__`` left out.

    A package importing its own submodules to re-export them (``__all__``) is not a
    cycle a maintainer trips over; two modules that need each other are.
    """
    g = import_graph(known)
    g.remove_nodes_from([n for n in list(g) if known[n].is_package])
    return sorted(sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1)


def agent_unit(name: str) -> str | None:
    """The agent unit a module belongs to (``rackplan.agent.kafka.tail`` -> ``kafka``); None outside the agent
    and for the agent package itself."""
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["rackplan", "agent"] else None


def unit_imports(known: dict[str, Module]) -> set[tuple[str, str, str, str]]:
    """Every import from one agent unit into another: (unit, module, imported unit, imported module)."""
    out = set()
    for m in known.values():
        src = agent_unit(m.name)
        for t in imports(m, known):
            dst = agent_unit(t)
            if src is not None and dst is not None and src != dst:
                out.add((src, m.name, dst, t))
    return out


def unranked_units(known: dict[str, Module], ranks: dict[str, int]) -> list[str]:
    """Agent units without a rank: a new sub-package must say where it stands."""
    return sorted({u for n in known if (u := agent_unit(n)) is not None} - ranks.keys())


def rank_violations(known: dict[str, Module], ranks: dict[str, int]) -> list[tuple[str, str]]:
    """Imports from an agent unit into one of the same rank or above (module -> imported module)."""
    return sorted((m, t) for src, m, dst, t in unit_imports(known) if ranks.get(dst, 0) >= ranks.get(src, 0))


def unit_cycles(known: dict[str, Module]) -> list[list[str]]:
    """Cycles between agent units (sub-packages need each other), ranks aside."""
    g = nx.DiGraph()
    g.add_edges_from((src, dst) for src, _, dst, _ in unit_imports(known))
    return sorted(sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1)


def function_sizes(known: dict[str, Module]) -> dict[str, int]:
    """Lines of every function, by ``module:qualified.name`` (methods and nested functions included)."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, module: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef) and child.end_lineno is not None:
                    key = f"{module}:{name}"
                    out[key] = max(out.get(key, 0), child.end_lineno - child.lineno + 1)
                visit(child, module, f"{name}.")
            else:
                visit(child, module, prefix)

    for m in known.values():
        visit(m.tree, m.name, "")
    return out


def long_functions(known: dict[str, Module], limit: int = 60) -> list[tuple[int, str]]:
    return sorted(((n, name) for name, n in function_sizes(known).items() if n > limit), reverse=True)


def module_sizes(known: dict[str, Module]) -> dict[str, int]:
    return {m.name: m.lines for m in known.values()}


def ratchet(sizes: dict[str, int], allowed: dict[str, int], limit: int) -> list[str]:
    """What breaks a size limit that may only be approached: an item over ``limit`` that is not in
    ``allowed`` (new), one that grew past its allowed size, and an allowed one that is now within the
    limit or gone (so the list only shrinks: it must be taken off)."""
    problems = []
    for name, n in sorted(sizes.items()):
        if n > limit and name not in allowed:
            problems.append(f"{name}: {n} lines, over {limit}")
        elif name in allowed and n > allowed[name]:
            problems.append(f"{name}: {n} lines, grew past its allowed {allowed[name]}")
    for name in sorted(allowed):
        if sizes.get(name, 0) <= limit:
            problems.append(f"{name}: {sizes.get(name, 'gone')}, within {limit}: take it off the list")
    return problems


def classes(known: dict[str, Module]) -> list[tuple[int, str]]:
    out = []
    for m in known.values():
        for node in ast.walk(m.tree):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                out.append((node.end_lineno - node.lineno + 1, f"{m.name}.{node.name}"))
    return sorted(out, reverse=True)


def _counted(what: str, items: list[str]) -> str:
    return f"{what}: {len(items)}" + (f" ({'; '.join(items)})" if items else "")


def report(root: Path) -> str:
    known = modules(root)
    biggest = max(known.values(), key=lambda m: (m.lines, m.name))
    units = {u for n in known if (u := agent_unit(n)) is not None}
    lines = [
        f"modules: {len(known)}",
        f"largest module: {biggest.name} ({biggest.lines} lines)",
        f"modules over 500 lines: {sum(1 for m in known.values() if m.lines > 500)}",
        "largest classes: " + ", ".join(f"{name} ({n})" for n, name in classes(known)[:3]),
        f"functions over 60 lines: {len(long_functions(known))}",
        _counted("import cycles", [" <-> ".join(c) for c in cycles(known)]),
        _counted("upward imports", [f"{a} -> {b}" for a, b in upward_imports(known)]),
    ]
    unranked = unranked_units(known, AGENT_RANKS)
    if unranked:
        lines.append(f"agent units: {len(units)}, {len(unranked)} without a rank")
    else:
        lines.append(
            f"agent units: {len(units)}, imports against their ranks: "
            f"{len(rank_violations(known, AGENT_RANKS))}, cycles between them: {len(unit_cycles(known))}"
        )
    return "\n".join(lines)


def offenders(root: Path, module_limit: int = 500, function_limit: int = 60) -> str:
    """Today's modules and functions over the limits, as the allow-lists of tests/test_architecture.py."""
    known = modules(root)
    out = []
    for title, sizes, limit in (
        ("LONG_MODULES", module_sizes(known), module_limit),
        ("LONG_FUNCTIONS", function_sizes(known), function_limit),
    ):
        out.append(f"{title}: dict[str, int] = {{")
        out += [f'    "{name}": {n},' for name, n in sorted(sizes.items()) if n > limit]
        out.append("}")
    return "\n".join(out)


if __name__ == "__main__":
    # python -m tests.architecture [ROOT]: the numbers of docs/architecture.md;
    # python -m tests.architecture --offenders [ROOT]: the ratchet's allow-lists as they stand
    args = sys.argv[1:]
    show = offenders if args[:1] == ["--offenders"] else report
    args = args[1:] if show is offenders else args
    print(show(Path(args[0]) if args else Path(__file__).resolve().parents[1]))
