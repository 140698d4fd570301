"""The Go tools ``make go-tools`` builds (helm, kubeconform, dashboard-check) and the schemas it makes.

They live in ``GO_TOOLS`` of the Makefile (``~/.cache/rackplan-go-tools``), outside the clone, so
one build serves every run and clone on a machine. A missing tool skips with the reason on a
developer's machine and fails in CI (``CI=true``), where ``make test`` builds them first, as
:mod:`tests.promtool` does for promtool.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: ``GO_TOOLS`` of the Makefile (exported to the tests it runs), else its default
HOME = Path(os.environ.get("GO_TOOLS") or Path(os.path.expanduser("~")) / ".cache" / "rackplan-go-tools")
#: where `make crd-schemas` writes the Prometheus Operator's kinds (committed)
CRD_SCHEMAS = ROOT / "deploy" / "schemas"


def _missing(reason: str) -> NoReturn:
    reason += ": `make go-tools` builds it (needs Go and the Go module proxy)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI must run it)")
    pytest.skip(reason)


def require(tool: str) -> str:
    """The tool's path (the Makefile's build first, then PATH); else skip locally, fail in CI."""
    built = HOME / "bin" / tool
    path = str(built) if built.is_file() and os.access(built, os.X_OK) else shutil.which(tool)
    if path is None:
        _missing(f"{tool} not found")
    return path


def k8s_version() -> str:
    """The Kubernetes version whose OpenAPI document the schemas come from (``K8S_VERSION``)."""
    m = re.search(r"^K8S_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert m, "the Makefile sets K8S_VERSION"
    return m.group(1)


def core_schemas() -> Path:
    """The directory of the Kubernetes kinds' schemas ``make go-tools`` made."""
    path = HOME / "schemas" / f"k8s-{k8s_version()}"
    if not (path / ".made").exists():
        _missing(f"no Kubernetes {k8s_version()} schemas in {path}")
    return path


def run(tool: str, *args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``tool args...``: its exit code and output, never raising on failure (the caller asserts)."""
    return subprocess.run(
        [require(tool), *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
