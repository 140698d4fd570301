"""The packages' public surfaces (:mod:`rackplan.assignor.surface`): one list, read by mypy and at run time."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rackplan.assignor.surface import exports

PACKAGES = (
    "rackplan.assignor",
    "rackplan.assignor.flow",
    "rackplan.assignor.consumer.sticky",
    "rackplan.assignor.consumer.rack_optimal",
)


@pytest.mark.parametrize("name", PACKAGES)
def test_every_listed_name_is_its_modules_object_and_nothing_else_is_offered(name: str) -> None:
    """``__all__`` is the TYPE_CHECKING list; each name is the defining module's object; others raise."""
    package = importlib.import_module(name)
    with open(package.__file__ or "", encoding="utf-8") as f:
        table = exports(f.read())
    assert table and package.__all__ == sorted(table)
    for public, (level, module, attr) in table.items():
        base = name.rsplit(".", level - 1)[0] if level > 1 else name
        defining = importlib.import_module(f"{base}.{module}")
        assert getattr(package, public) is getattr(defining, attr)
        assert public in dir(package)
    with pytest.raises(AttributeError, match=f"module '{name}' has no attribute 'not_public'"):
        _ = package.not_public


def test_only_relative_imports_under_type_checking_are_listed() -> None:
    """Imports elsewhere, absolute ones and plain ``import`` lines are not the package's surface."""
    source = """
from typing import TYPE_CHECKING
from .a import hidden
if TYPE_CHECKING:
    import os
    from collections import deque
    from .b import shown as shown
    from ..c import inner as renamed
"""
    assert exports(source) == {"shown": (1, "b", "shown"), "renamed": (2, "c", "inner")}


def _exports_by_ast(source: str) -> dict[str, tuple[int, str, str]]:
    """The oracle: the same table read from the parsed module (what ``exports`` did before issue 29)."""
    found: dict[str, tuple[int, str, str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.level > 0 and stmt.module:
                    for alias in stmt.names:
                        found[alias.asname or alias.name] = (stmt.level, stmt.module, alias.name)
    return found


def test_the_line_reading_equals_the_parsed_one_on_every_package_and_on_odd_layouts() -> None:
    """``exports`` reads lines (no ``ast`` at start-up); on every package ``__init__`` of the project, and on a
    block with parenthesised imports, comments and code after it, it gives what the parsed module gives."""
    root = Path(importlib.import_module("rackplan").__file__ or "").resolve().parent.parent
    inits = [
        p
        for top in ("assignor", "agent", "fleet", "rackplan")
        for p in sorted((root / top).rglob("__init__.py"))
    ]
    with_block = 0
    for path in inits:
        source = path.read_text(encoding="utf-8")
        assert exports(source) == _exports_by_ast(source), path
        with_block += bool(_exports_by_ast(source))
    assert with_block >= len(PACKAGES)
    odd = """
import sys
if TYPE_CHECKING:  # the surface
    from .a import (
        one as one,  # first
        two,
    )
    from ..b.c import three as four

    from .d import five as five
x = 1
if sys.version_info > (3,):
    from .e import hidden as hidden
"""
    assert (
        exports(odd)
        == _exports_by_ast(odd)
        == {
            "one": (1, "a", "one"),
            "two": (1, "a", "two"),
            "four": (2, "b.c", "three"),
            "five": (1, "d", "five"),
        }
    )


def test_an_equal_sticky_group_loads_neither_the_unequal_path_nor_the_programs() -> None:
    """The cooperative-sticky package offers the general settling, but importing it loads only what is asked."""
    code = (
        "import sys\n"
        "from rackplan.assignor.consumer.sticky import assign\n"
        "print(sorted(m for m in sys.modules if 'general' in m or 'rack_optimal' in m or 'highs' in m))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_list_is_read_through_the_loader_when_the_code_is_a_zip(tmp_path: Path) -> None:
    """Spark ships the code as a zip (fleet's standalone mode): ``open(__file__)`` cannot read the list there,
    the package's loader can."""
    api = importlib.import_module("rackplan.assignor")  # its __all__ exists at run time only
    source = Path(api.__file__ or "").resolve().parent
    code = tmp_path / "code.zip"
    with zipfile.ZipFile(code, "w") as z:
        z.writestr("rackplan/__init__.py", "")
        for path in sorted(source.rglob("*.py")):
            z.write(path, f"rackplan/assignor/{path.relative_to(source)}")
    probe = (
        "import rackplan.assignor as a\n"
        "from rackplan.assignor.consumer.sticky import assign\n"
        "print(a.__file__, len(a.__all__), a.parse_instance.__module__, assign.__module__)"
    )
    env = {**os.environ, "PYTHONPATH": str(code)}
    run = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    where, count, parse_module, assign_module = run.stdout.split()
    assert where.startswith(str(code)) and int(count) == len(api.__all__)
    assert (parse_module, assign_module) == (
        "rackplan.assignor.parse",
        "rackplan.assignor.consumer.sticky.plan",
    )
