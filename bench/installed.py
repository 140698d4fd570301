"""rackplan installed from its built wheel, as a user has it: for the test that the wheel works and the benches that time the command.

The development venv imports rackplan through setuptools' editable finder: a ``.pth`` file that
``site`` runs at every interpreter start, importing ``pathlib``, ``fnmatch``, ``urllib.parse``,
``ipaddress``, ``importlib.util`` and more before any line of the program.  ``bench_startup`` measured
``python -c pass`` at 57 ms of CPU there against 23 ms from the wheel, and issue 29's floor (which needs
some of those modules anyway) 54-62 against 40-46 ms: a cost no user's installed wheel pays.  Timing
``rackplan assign`` against the floor there adds it to both sides, so the ratio reads lower than a
user's would.

:func:`install` builds the wheel from the files the Dockerfile copies (in a scratch directory), installs
it without its dependencies into a fresh venv that borrows them from this interpreter's site-packages
(a plain path in a ``.pth`` file: no editable finder is activated), and :data:`Installed.cwd` is a
directory outside the repository, so nothing can come from the source tree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: What the wheel is built from: the Dockerfile's copies (``rackplan/`` links to the other three).
SOURCES = ("pyproject.toml", "README.md")
PACKAGES = ("rackplan", "assignor", "agent", "fleet")


@dataclass(frozen=True)
class Installed:
    """A venv with rackplan's wheel installed: its interpreter, its site-packages, the wheel, and a
    working directory outside the repository to run it from."""

    python: Path
    site: Path
    wheel: Path
    cwd: Path

    @property
    def console_script(self) -> Path:
        return self.python.parent / "rackplan"


def clean_env() -> dict[str, str]:
    """This process's environment without ``RACKPLAN_`` settings or ``PYTHON`` variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("RACKPLAN_", "PYTHON"))}


def build_wheel(scratch: Path, root: Path = ROOT) -> Path:
    """The wheel built from a copy of the sources of the tree at ``root`` (this one by default) in
    ``scratch`` (raises with pip's output on failure)."""
    src = scratch / "src"
    src.mkdir(parents=True)
    for name in SOURCES:
        shutil.copy(root / name, src / name)
    for pkg in PACKAGES:
        shutil.copytree(root / pkg, src / pkg, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    dist = scratch / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
        capture_output=True,
        text=True,
        timeout=180,
        env=clean_env(),
    )
    if build.returncode != 0:
        raise RuntimeError(f"pip wheel failed:\n{build.stdout}{build.stderr}")
    (wheel,) = dist.glob("rackplan-*.whl")
    return wheel


def install(scratch: Path, wheel: Path | None = None, root: Path = ROOT) -> Installed:
    """rackplan's wheel (``wheel``, else built here from the tree at ``root``) installed into a fresh venv
    under ``scratch`` (see the module docstring)."""
    wheel = build_wheel(scratch, root) if wheel is None else wheel
    scratch.mkdir(parents=True, exist_ok=True)
    venv = scratch / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    py = venv / "bin" / "python"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(py),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"pip install failed:\n{done.stdout}{done.stderr}")
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # The dependencies (confluent-kafka, pydantic, ...) from this interpreter, after the venv's own.
    Path(site, "zz-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    work = scratch / "elsewhere"
    work.mkdir()
    return Installed(python=py, site=Path(site), wheel=wheel, cwd=work)
