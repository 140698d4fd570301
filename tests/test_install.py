"""``pip install`` of the built wheel works in a fresh virtual environment, and the container listens
where a published port reaches it.

The wheel is built from the files the Dockerfile copies (pyproject.toml, README.md, rackplan/, assignor/, agent/, fleet/)
in a scratch directory, installed without its dependencies into a new venv that borrows them from
this interpreter's site-packages (a plain path in a .pth file: no editable finder of this checkout is
activated), and run from a directory outside the repository, so nothing can come from the source tree.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from bench.installed import build_wheel, clean_env, install
from rackplan.assignor.cli import assign_document, dumps

ROOT = Path(__file__).resolve().parent.parent

INSTANCE = {
    "cluster": {
        "brokers": [{"id": 1, "rack": "az-a"}, {"id": 2, "rack": "az-b"}, {"id": 3, "rack": None}],
        "topics": {"orders": [[1, 2], [2, 3], [3, 1]]},
    },
    "consumer_group": {
        "group_id": "payments",
        "assignor": "rack-optimal",
        "members": [
            {"member_id": "m-1", "rack": "az-a", "topics": ["orders"]},
            {"member_id": "m-2", "rack": "az-b", "topics": ["orders"]},
        ],
    },
}


@pytest.mark.timeout(240)
def test_the_built_wheel_installs_and_runs_in_a_fresh_venv(tmp_path: Path) -> None:
    t0 = time.monotonic()
    wheel = build_wheel(tmp_path)
    built = time.monotonic()
    with zipfile.ZipFile(wheel) as zf:
        tops = {name.split("/")[0] for name in zf.namelist()}
        names = set(zf.namelist())
    # One import name: no generic top-level packages (agent, assignor) claimed in site-packages.
    assert {t for t in tops if not t.endswith(".dist-info")} == {"rackplan"}, tops
    assert {"rackplan/agent/runtime/loop.py", "rackplan/assignor/cli.py", "rackplan/fleet/job.py"} <= names
    schema_files = sorted(p.name for p in (ROOT / "agent" / "protocol" / "schemas").glob("*.json"))
    assert len(schema_files) == 4, schema_files
    assert {f"rackplan/agent/protocol/schemas/{n}" for n in schema_files} <= names, sorted(names)

    env = install(tmp_path, wheel)
    py, site, work = env.python, str(env.site), env.cwd
    rackplan = str(env.console_script)

    def run(*args: str, **more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args, capture_output=True, text=True, timeout=60, cwd=work, env={**clean_env(), **more}
        )

    editable = run(str(py), "-c", "import sys; print(sorted(m for m in sys.modules if 'editable' in m))")
    assert editable.returncode == 0 and editable.stdout.strip() == "[]", editable.stdout + editable.stderr
    where = run(
        str(py),
        "-c",
        "import rackplan.assignor, rackplan.agent, rackplan.fleet as f;"
        " print(rackplan.assignor.__file__); print(rackplan.agent.__file__); print(f.__file__)",
    )
    assert where.returncode == 0, where.stderr
    assert all(line.startswith(site) for line in where.stdout.split()), where.stdout
    # The control topics' schemas ship as package data, read from the installed package, equal to docs/.
    shipped = run(
        str(py),
        "-c",
        "import json, sys; from importlib import resources;"
        " d = resources.files('rackplan.agent.protocol.schemas');"
        " print(json.dumps({n: d.joinpath(n).read_text(encoding='utf-8') for n in sys.argv[1:]}))",
        *schema_files,
    )
    assert shipped.returncode == 0, shipped.stderr
    assert json.loads(shipped.stdout) == {
        n: (ROOT / "docs" / n).read_text(encoding="utf-8") for n in schema_files
    }
    generic = run(str(py), "-c", "import agent")
    assert generic.returncode == 1 and "No module named 'agent'" in generic.stderr, generic.stderr

    version = run(rackplan, "--version")
    assert version.returncode == 0 and re.fullmatch(r"rackplan \d+\.\d+\.\d+.*\n", version.stdout), version

    instance = work / "instance.json"
    instance.write_text(json.dumps(INSTANCE), encoding="utf-8")
    plan = run(rackplan, "assign", str(instance))
    assert plan.returncode == 0, plan.stderr
    out = json.loads(plan.stdout)
    expected = json.loads(dumps(assign_document(INSTANCE)))
    out["stats"].pop("elapsed_ms"), expected["stats"].pop("elapsed_ms")
    assert out == expected
    assert out["stats"]["cross_rack"] == 0

    # The agent's half is in the wheel too: its settings are checked (exit 2, the key named).
    bad = run(rackplan, "agent", "run", RACKPLAN_POLL_INTERVAL_S="0")
    assert bad.returncode == 2 and "poll_interval_s" in bad.stderr, bad.stderr
    print(f"wheel built in {built - t0:.1f} s, installed and run in {time.monotonic() - built:.1f} s")


def test_the_container_listens_on_every_interface_and_the_default_stays_loopback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rackplan.agent.settings.sections import Settings

    for k in list(os.environ):
        if k.startswith("RACKPLAN_"):
            monkeypatch.delenv(k)
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    env = dict(re.findall(r"^ENV\s+(RACKPLAN_\w+)=(\S+)$", text, re.M))
    assert env == {"RACKPLAN_HTTP__HOST": "0.0.0.0"}
    exposed = re.findall(r"^EXPOSE\s+(\d+)$", text, re.M)
    assert Settings.load().http.host == "127.0.0.1"
    assert exposed == [str(Settings.load().http.port)]
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert Settings.load().http.host == "0.0.0.0"
