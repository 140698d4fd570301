"""promtool and amtool (Debian's ``prometheus`` packages, ``make promtool``) for the tests of Prometheus files.

Missing promtool skips with the reason on a developer's machine and fails in CI (``CI=true``), where
``make test`` installs it first: a check that silently never runs is no check.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def require(tool: str, package: str) -> str:
    """The tool's path; else skip (locally) or fail (in CI) naming the package that ships it."""
    path = shutil.which(tool)
    if path is None:
        reason = f"{tool} not found: `make promtool` installs Debian's {package} package"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason} (CI must run it)")
        pytest.skip(reason)
    return path


def promtool() -> str:
    return require("promtool", "prometheus")


def amtool() -> str:
    return require("amtool", "prometheus-alertmanager")


def run(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``promtool args...``: its exit code and output, never raising on failure (the caller asserts)."""
    return subprocess.run(
        [promtool(), *map(str, args)], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )
