"""A Spark standalone cluster on loopback, from the PySpark package alone: for tests, benchmarks and
trying out the cluster path of docs/fleet.md without a real cluster.

The master and each worker are JVMs started with the package's own
``bin/spark-class`` (no Spark download, no ``sbin`` scripts, no ssh), bound
to 127.0.0.1, each in its own process group so that :meth:`Standalone.stop`
ends them and the executors they started, and nothing else.  Then
:func:`submit_command` builds the ``spark-submit`` command docs/fleet.md
gives users: the code as a zip (``--py-files``) and the Python environment
as an archive built like ``venv-pack`` builds one (``--archives env.zip#env`` and ``spark.pyspark.python=./env/bin/python``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any


class StandaloneError(RuntimeError):
    """The cluster did not come up."""


def spark_home() -> Path:
    import pyspark  # type: ignore[import-not-found,unused-ignore]

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Standalone:
    """``with Standalone(tmp, workers=2, cores=1) as cluster: ... cluster.url ...``."""

    def __init__(self, work: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.work = work
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self._procs: list[subprocess.Popen[bytes]] = []
        self._logs: list[IO[bytes]] = []

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(self.work / "local"),
            "SPARK_WORKER_DIR": str(self.work / "workers"),
        }

    def _start(self, name: str, args: Sequence[str]) -> Path:
        log = self.work / f"{name}.log"
        f = log.open("wb")
        self._logs.append(f)
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        self._procs.append(
            subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=self.env(), start_new_session=True)
        )
        return log

    def start(self, timeout: float = 120.0) -> Standalone:
        self.work.mkdir(parents=True, exist_ok=True)
        master = self._start(
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
             "--webui-port", str(free_port())],
        )  # fmt: skip
        for i in range(self.workers):
            self._start(
                f"worker-{i}",
                ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", str(self.cores),
                 "--memory", self.memory, "--webui-port", str(free_port()),
                 "--work-dir", str(self.work / f"worker-{i}"), self.url],
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = master.read_text(errors="replace")
            if text.count("Registering worker") >= self.workers:
                return self
            dead = [p for p in self._procs if p.poll() is not None]
            if dead:
                break
            time.sleep(0.5)
        self.stop()
        raise StandaloneError(f"the standalone cluster did not start; see {self.work}/*.log")

    def pids(self) -> list[int]:
        """Process ids of the workers (their executors are their descendants)."""
        return [p.pid for p in self._procs[1:]]

    def stop(self) -> None:
        """SIGTERM to each process group started here (workers end their executors), then SIGKILL."""
        for p in reversed(self._procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in reversed(self._procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        for f in self._logs:
            f.close()
        self._procs.clear()
        self._logs.clear()

    def __enter__(self) -> Standalone:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def pack_code(root: Path, out: Path) -> Path:
    """The ``rackplan`` package as one zip for ``--py-files`` (what ``zip -qr rackplan.zip rackplan`` gives).

    The source tree keeps the subpackages in top-level folders that ``rackplan/``
    links to; the zip holds them where the import system looks: ``rackplan/agent/...``.
    """
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted((root / "rackplan").glob("*.py")):
            z.write(f, f.relative_to(root).as_posix())
        for package in ("assignor", "agent", "fleet"):
            for f in sorted((root / package).rglob("*.py")):
                z.write(f, "rackplan/" + f.relative_to(root).as_posix())
    return out


_IMPORTS = """
import json, sys, sysconfig
from pathlib import Path
import pyarrow, pyarrow.parquet
from rackplan.fleet import job, stages, units
from rackplan.fleet.scenarios import parse_scenarios
from rackplan.fleet.synthetic import cluster_document
for g in units.group_rows(json.dumps(cluster_document(0, 4, streams_apps=1))):
    units.group_results(g, parse_scenarios([{"name": "x", "kind": "lose_rack", "rack": "az-a"}]))
pure = Path(sysconfig.get_paths()["purelib"]).resolve()
tops = set()
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None)
    if f and Path(f).resolve().is_relative_to(pure):
        tops.add(Path(f).resolve().relative_to(pure).parts[0])
print(json.dumps(sorted(tops)))
"""


def executor_packages(root: Path) -> list[str]:
    """Top-level entries of site-packages that the executors import (found by running a few units)."""
    out = subprocess.run(
        [sys.executable, "-c", _IMPORTS], cwd=root, capture_output=True, text=True, check=True, timeout=300
    )
    names: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return [n for n in names if not n.startswith(("__editable__", "_distutils_hack"))]


def pack_env(root: Path, out: Path) -> Path:
    """The executors' Python environment as an archive for ``--archives out#env``, built the way
    ``venv-pack`` builds one: ``bin/python`` and ``pyvenv.cfg`` pointing at the base interpreter
    (which must exist at the same path on every node: true here, one machine), and a copy of the
    site-packages the executors import (pyarrow, numpy, pydantic, PyYAML, ...).  PySpark itself
    is not packed: executors take it from their Spark installation."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    interpreter = Path(sys.base_prefix) / "bin" / version
    cfg = f"home = {interpreter.parent}\ninclude-system-site-packages = false\nversion = {sys.version.split()[0]}\n"
    # A zip, not a tar: Spark unpacks ``--archives`` itself on standalone and Kubernetes, and its
    # tar reader drops the executable bit (bin/python: "Permission denied"); its zip reader keeps it.
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.write(interpreter, "bin/python")
        z.writestr("pyvenv.cfg", cfg)
        for name in executor_packages(root):
            for entry in (purelib / name, purelib / f"{name}.libs"):
                files = [entry] if entry.is_file() else sorted(f for f in entry.rglob("*") if f.is_file())
                for f in files:
                    if "__pycache__" not in f.parts:
                        z.write(f, f"lib/{version}/site-packages/{f.relative_to(purelib).as_posix()}")
    return out


def submit_command(
    master: str, code_zip: Path, env_archive: Path, script: Path, args: Sequence[str], **conf: Any
) -> list[str]:
    """The ``spark-submit`` command of docs/fleet.md ("On a cluster")."""
    cmd = [
        str(spark_home() / "bin" / "spark-submit"),
        "--master", master,
        "--deploy-mode", "client",
        "--conf", "spark.driver.host=127.0.0.1",
        "--conf", f"spark.pyspark.driver.python={sys.executable}",
        "--archives", f"{env_archive}#env",
        "--conf", "spark.pyspark.python=./env/bin/python",
        "--py-files", str(code_zip),
    ]  # fmt: skip
    for key, value in sorted(conf.items()):
        cmd += ["--conf", f"{key}={value}"]
    return [*cmd, str(script), *args]
