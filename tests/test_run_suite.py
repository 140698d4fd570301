"""integration/run_suite.sh: a native crash of the suite runs it once more; a failing test never does."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import ROOT

SCRIPT = ROOT / "integration" / "run_suite.sh"


def fake_pytest(tmp_path: Path, outcomes: list[str]) -> Path:
    """A stand-in for pytest that, on its n-th run, exits with outcomes[n] ('abort' = SIGABRT)."""
    script = tmp_path / "fake-pytest"
    runs = tmp_path / "runs"
    lines = ["#!/usr/bin/env bash", f'echo "$@" >> {runs}', f"n=$(wc -l < {runs})"]
    for i, outcome in enumerate(outcomes, start=1):
        action = "kill -ABRT $$" if outcome == "abort" else f"exit {outcome}"
        lines.append(f'if [ "$n" -eq {i} ]; then {action}; fi')
    script.write_text("\n".join(lines) + "\nexit 0\n")
    script.chmod(0o755)
    return script


def run(tmp_path: Path, outcomes: list[str]) -> tuple[int, int, str]:
    r = subprocess.run(
        [str(SCRIPT), str(fake_pytest(tmp_path, outcomes)), "integration", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    runs = (tmp_path / "runs").read_text().splitlines()
    assert all(line == "integration -q" for line in runs)  # the arguments reach pytest unchanged
    return r.returncode, len(runs), r.stderr


def test_a_crash_runs_the_suite_once_more(tmp_path: Path) -> None:
    code, runs, err = run(tmp_path, ["abort", "0"])
    assert (code, runs) == (0, 2)
    assert "died of signal 6" in err


def test_two_crashes_fail_the_build(tmp_path: Path) -> None:
    code, runs, _ = run(tmp_path, ["abort", "abort"])
    assert (code, runs) == (134, 2)


def test_a_failing_test_is_never_retried(tmp_path: Path) -> None:
    code, runs, err = run(tmp_path, ["1", "0"])
    assert (code, runs, err) == (1, 1, "")


def test_a_passing_suite_runs_once(tmp_path: Path) -> None:
    assert run(tmp_path, ["0"])[:2] == (0, 1)
