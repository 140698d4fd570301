"""A package's public names, listed once and imported on first use.

A package ``__init__`` lists what it offers in one block of imports under
``if TYPE_CHECKING:``, each name re-exported explicitly (``from .m import x as x``,
or an alias).  mypy reads that block as the package's attributes, typed; at run
time :func:`attach` reads the very same block from the ``__init__``'s source and
gives the package a PEP 562 ``__getattr__`` that imports a name's module when the
name is first asked for, a ``__dir__`` and an ``__all__``.  So the public names
are written once (the issue-25 finding: they were written three times, kept in
step by hand), and importing a package costs no more than the names used: the
``rackplan assign`` of a range instance never loads the cooperative-sticky
settling, nor a cooperative-sticky one the rack-optimal programs (issue 29).
The same idea as SPEC 1's ``lazy_loader.attach_stub``, without a separate stub.

Only ``from .module import name`` statements (relative, one level or more) count;
``import x`` lines in the block are for annotations and are not exported.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable

#: What :func:`attach` returns: the package's ``__getattr__``, ``__dir__`` and ``__all__``.
Surface = tuple[Callable[[str], object], Callable[[], list[str]], list[str]]


#: one re-export line of the block: ``from .module import name`` or ``from ..module import name as alias``
_EXPORT = re.compile(r"from (\.+)([\w.]+) import (\w+)(?: as (\w+))?")


def exports(source: str) -> dict[str, tuple[int, str, str]]:
    """Public name -> (relative level, module, attribute) from the ``if TYPE_CHECKING:`` blocks of ``source``.

    Read line by line, not with :mod:`ast`: every package import pays for this, and ``ast`` was a
    tenth of ``rackplan assign``'s start-up above the interpreter (issue 29).  A block is the lines
    indented under a top-level ``if TYPE_CHECKING:``; parenthesised imports are joined first.  The
    package ``__init__`` files keep one re-export per line (ruff's isort), and
    ``tests/assignor/test_surface.py`` checks that this reading equals an ``ast`` one on each of them.
    """
    found: dict[str, tuple[int, str, str]] = {}
    inside = False
    pending = ""
    for raw in source.splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line:
            continue
        if not raw[0].isspace():
            inside = line.replace(" ", "") == "ifTYPE_CHECKING:"
            pending = ""
            continue
        if not inside:
            continue
        text = pending + " " + line.strip() if pending else line.strip()
        if text.count("(") > text.count(")"):
            pending = text
            continue
        pending = ""
        head, _, names = text.replace("(", " ").replace(")", " ").partition(" import ")
        match = _EXPORT.fullmatch(f"{head.strip()} import x")
        if match is None:
            continue
        for item in names.split(","):
            alias = _EXPORT.fullmatch(f"from {match.group(1)}{match.group(2)} import {item.strip()}")
            if alias is not None:
                found[alias.group(4) or alias.group(3)] = (
                    len(match.group(1)),
                    match.group(2),
                    alias.group(3),
                )
    return found


def attach(package: str, init_file: str) -> Surface:
    """``__getattr__``, ``__dir__`` and ``__all__`` for ``package``, from its ``__init__``'s TYPE_CHECKING block."""
    module = sys.modules[package]
    # Through the package's loader, not open(): Spark ships the code as a zip (fleet's standalone mode).
    get_data = getattr(module.__spec__.loader if module.__spec__ else None, "get_data", None)
    if get_data is None:
        raise ImportError(f"{package}: its loader cannot read {init_file}, where its public names are listed")
    table = exports(get_data(init_file).decode("utf-8"))
    namespace = module.__dict__

    def __getattr__(name: str) -> object:
        where = table.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        level, module, attr = where
        value = getattr(importlib.import_module("." * level + module, package), attr)
        namespace[name] = value  # later look-ups are plain attribute reads
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    return __getattr__, __dir__, sorted(table)
