"""The fleet job on a real Spark standalone cluster: a master and two 1-core workers on loopback.

Started from the PySpark package's own ``spark-class`` (:mod:`rackplan.fleet.standalone`),
the job submitted with ``spark-submit`` exactly as docs/fleet.md tells a user
(the code as a zip, the Python environment as an ``--archives`` archive), its
tables compared with a local-mode run of the same input: identical but for
``run_id`` and timings.  The cluster is stopped (process groups, by id) and
its folders removed by the test.  About two minutes on two busy cores.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rackplan.fleet.synthetic import cluster_document
from tests.fleet.conftest import _spark_missing

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = [
    {"name": "lose-az-a", "kind": "lose_rack", "rack": "az-a"},
    {"name": "new-zone", "steps": [{"kind": "add_rack", "rack": "az-d"}, {"kind": "shift_members", "fraction": 0.25, "to_rack": "az-d"}]},
]  # fmt: skip
VOLATILE = {"run_id", "elapsed_ms"}


def _tables(out: Path) -> dict[str, Any]:
    from rackplan.fleet.job import TABLES
    from rackplan.fleet.storage import read_table

    frames = {}
    for name in TABLES:
        frame = read_table(str(out / name)).to_pandas()
        frame = frame[[c for c in sorted(frame.columns) if c not in VOLATILE]]
        key = [c for c in ("cluster_id", "kind", "group", "scenario", "assignor") if c in frame.columns]
        frames[name] = frame.sort_values(key, kind="mergesort").reset_index(drop=True)
    return frames


@pytest.mark.spark
@pytest.mark.timeout(600)  # two JVM runs and a cluster on two shared cores
def test_standalone_cluster_gives_the_tables_of_local_mode(tmp_path: Path) -> None:
    reason = _spark_missing()
    if reason:
        pytest.skip(reason)
    from rackplan.fleet.standalone import Standalone, pack_code, pack_env, submit_command

    snaps = tmp_path / "snapshots"
    snaps.mkdir()
    for i in range(2):
        doc = cluster_document(i, 5, seed=21, streams_apps=1)
        (snaps / f"{doc['cluster_id']}.jsonl").write_text(json.dumps(doc) + "\n")
    scen = tmp_path / "what-if.json"
    scen.write_text(json.dumps(SCENARIOS))
    args = ["--snapshots", snaps.as_uri(), "--scenarios", str(scen), "--progress", "5"]

    local = subprocess.run(
        [sys.executable, "-m", "rackplan.fleet.job", *args, "--out", str(tmp_path / "local"), "--master", "local[1]"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert local.returncode == 0, local.stderr[-3000:]

    # What a user ships: the code (a zip) and the environment (an archive); the entry script outside
    # the source tree, so the driver too imports the package from the zip.
    code = pack_code(ROOT, tmp_path / "rackplan.zip")
    env = pack_env(ROOT, tmp_path / "env.zip")
    script = tmp_path / "fleet_job.py"
    shutil.copy(ROOT / "fleet" / "job.py", script)
    cluster_dir = tmp_path / "cluster"
    with Standalone(cluster_dir, workers=2, cores=1) as cluster:
        cmd = submit_command(
            cluster.url, code, env, script, [*args, "--out", (tmp_path / "cluster-out").as_uri()],
            **{"spark.executor.memory": "512m", "spark.cores.max": "2", "spark.ui.enabled": "false"},
        )  # fmt: skip
        run = subprocess.run(
            cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False, env=cluster.env()
        )
        worker_logs = "".join(p.read_text(errors="replace") for p in cluster_dir.glob("worker-*.log"))
    assert run.returncode == 0, run.stderr[-4000:]
    summary = json.loads(run.stdout[run.stdout.index("{\n") :])  # the summary: after the log lines
    assert summary["statuses"].get("ok", 0) > 0 and not summary["statuses"].get("failed")
    assert worker_logs.count("Asked to launch executor") == 2  # both workers ran an executor
    # spark-submit merges the Python driver's stderr into its stdout: the progress events are there.
    events = [json.loads(line) for line in (run.stdout + run.stderr).splitlines() if line.startswith('{"')]
    phases = [e["phase"] for e in events if e.get("event") == "fleet.phase"]
    assert phases[:3] == ["starting Spark", "reading", "planning"] and phases[-1] == "done"
    assert any(e.get("event") == "fleet.progress" and e["total"] > 0 for e in events)

    got, want = _tables(tmp_path / "cluster-out"), _tables(tmp_path / "local")
    for name, frame in want.items():
        assert list(got[name].columns) == list(frame.columns), name
        assert got[name].equals(frame), name
    shutil.rmtree(cluster_dir)
    env.unlink()  # a quarter of a gigabyte
