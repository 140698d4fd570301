"""The compiled core's own tests, with the core built under AddressSanitizer and UBSan (issue 29).

The core is C that reads Python objects and indexes arrays sized from them (``_flowcore.c`` and the
sources beside it); a read past an array or an undefined shift could return a plausible wrong flow or
plan instead of crashing.  Here the extension is built again from the sources ``pyproject.toml`` lists,
with ``-fsanitize=address,undefined`` (any undefined behaviour ends the run), and the tests that drive
every entry point against its Python oracle run in a child interpreter that imports that build as the
core, with a fixed Hypothesis seed (the same inputs every run: a report here is reproducible; the
unsanitized suite draws new ones each time).  The sanitizers' reports go to files whose text the
failure shows (pytest's capture would swallow them when the child exits).  Skipped where no ``gcc``
with ``libasan`` exists (the install then has no core or another compiler's).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path
from xml.etree import ElementTree

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The test files run against the sanitized build: every entry point of the core, each with its oracle.
CORE_TESTS = [
    "tests/assignor/test_flow_core.py",
    "tests/assignor/test_constrained_core.py",
    "tests/assignor/test_sticky_withhold.py",
    "tests/assignor/test_general_core_groups.py",
    "tests/assignor/test_general_readback.py",
    "tests/assignor/test_general_floor.py",
    "tests/assignor/test_general_nodes.py",
    "tests/assignor/test_general_spare.py",
    "tests/assignor/test_general_edges.py",
    "tests/assignor/test_range.py::test_the_compiled_passes_are_the_python_ones",
    "tests/assignor/test_range.py::test_the_compiled_passes_hand_back_what_they_cannot_take",
]

#: The child: the sanitized build registered as the core before rackplan imports it, then pytest.
_CHILD = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("rackplan.assignor.flow._flowcore", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
sys.modules["rackplan.assignor.flow._flowcore"] = module
from rackplan.assignor.flow import mincost
assert mincost._core is module, "the sanitized build is not the core"
import pytest
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:xdist", "--hypothesis-seed=0", *sys.argv[2:]]))
"""


def _sources() -> list[str]:
    """The extension's sources as the build lists them (``rackplan/`` links to ``assignor/``)."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        (ext,) = tomllib.load(f)["tool"]["setuptools"]["ext-modules"]
    return [str(ROOT / s) for s in ext["sources"]]


def test_the_core_tests_pass_with_the_core_built_under_sanitizers(tmp_path: Path) -> None:
    cc = shutil.which("gcc")
    if cc is None:
        pytest.skip("no gcc: the sanitized build needs it")
    libasan = subprocess.run(
        [cc, "-print-file-name=libasan.so"], capture_output=True, text=True
    ).stdout.strip()
    if not os.path.isabs(libasan):
        pytest.skip("gcc has no libasan")
    so = tmp_path / f"_flowcore{sysconfig.get_config_var('EXT_SUFFIX')}"
    build = [
        cc,
        "-O1",
        "-g",
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=undefined",
        "-fno-omit-frame-pointer",
        "-shared",
        "-fPIC",
        f"-I{sysconfig.get_paths()['include']}",
        *_sources(),
        "-o",
        str(so),
    ]
    subprocess.run(build, check=True, capture_output=True)
    logs = tmp_path / "reports"
    env = {
        **os.environ,
        "LD_PRELOAD": libasan,
        "ASAN_OPTIONS": f"detect_leaks=0:abort_on_error=1:log_path={logs}",
        "UBSAN_OPTIONS": f"print_stacktrace=1:log_path={logs}",
    }
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(so), f"--junitxml={tmp_path / 'core.xml'}", *CORE_TESTS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    reports = "".join(p.read_text(errors="replace") for p in sorted(tmp_path.glob("reports*")))
    assert child.returncode == 0 and not reports, (
        reports[-4000:],
        child.stdout[-4000:],
        child.stderr[-2000:],
    )
    suite = ElementTree.parse(tmp_path / "core.xml").getroot().find("testsuite")
    assert suite is not None
    ran, bad = int(suite.get("tests", 0)), int(suite.get("failures", 0)) + int(suite.get("errors", 0))
    assert ran >= 80 and bad == 0 and int(suite.get("skipped", 0)) == 0, (ran, bad)
