"""``rackplan assign`` on small instances: start-up against the floor (issue 29, item 3).

    python -m bench.bench_startup [--repeats 20] [--editable]

On a small instance the command is all start-up: the interpreter, the imports,
reading and writing JSON.  For each case (one small instance per assignor) the
instance is written to a file, then each of these runs ``--repeats`` times in a
fresh interpreter, its CPU (user + system, from ``wait4``) and wall time taken:

* ``python -c pass``: the interpreter alone;
* ``floor``: the interpreter reading the file, ``json.loads`` and ``json.dumps``
  of the document to stdout (issue 29's floor: nothing any command can skip);
* ``rackplan assign FILE``: what the console script runs (``rackplan.cli.main``).

Medians of the repeats, the floor's and the command's runs interleaved; the modules each command imports (``sys.modules`` at
exit, less the bare interpreter's) and whether numpy, highspy or networkx is
among them.  CPU is the figure to compare on a shared machine.

Install: by default the children run rackplan installed from its wheel, built from this tree into a
scratch venv, from a directory outside the repository (``bench.installed``), as a user runs it.
``--editable`` runs them in this development venv instead: its editable finder costs every
interpreter start there (``python -c pass`` 57 against 23 ms of CPU, the floor about 15 ms more:
docs/performance.md), the same on both sides of a ratio, so its ratios read lower than the wheel's.

Bytecode: an installed wheel has its modules compiled (pip writes ``.pyc``), so by
default the children may write and read bytecode, under a private
``PYTHONPYCACHEPREFIX`` that the discarded first run of each command fills.
``--no-bytecode`` keeps ``PYTHONDONTWRITEBYTECODE`` as this machine's shells set it:
every run then compiles every project module from source, and each module costs
several times more.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SOLVERS = ("numpy", "highspy", "networkx")

_FLOOR = "import json, sys\nwith open(sys.argv[1], 'rb') as f: doc = json.loads(f.read())\nsys.stdout.write(json.dumps(doc))\n"
_ASSIGN = "import sys\nfrom rackplan.cli import main\nsys.exit(main())\n"
_MODULES = (
    "import atexit, sys\n"
    "atexit.register(lambda: sys.stderr.write('\\n@@' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
)


def _cluster(partitions: int) -> dict[str, Any]:
    return {
        "brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}],
        "topics": {"t": [[1 + p % 2] for p in range(partitions)], "u": [[2], [1]]},
    }


def _group(assignor: str, unequal: bool) -> dict[str, Any]:
    members = [
        {"member_id": "m1", "rack": "a", "topics": ["t", "u"]},
        {"member_id": "m2", "rack": "b", "topics": ["t"] if unequal else ["t", "u"]},
    ]
    return {"group_id": "g", "assignor": assignor, "members": members}


def cases() -> dict[str, dict[str, Any]]:
    """One small instance per path: the issue's one-partition range group and its siblings."""
    one = {"brokers": [{"id": 1, "rack": "a"}], "topics": {"t": [[1]]}}
    return {
        "range, 1 partition": {
            "cluster": one,
            "consumer_group": {
                "group_id": "g",
                "assignor": "range",
                "members": [{"member_id": "m", "rack": "a", "topics": ["t"]}],
            },
        },
        "cooperative-sticky, equal": {
            "cluster": _cluster(4),
            "consumer_group": _group("cooperative-sticky", False),
        },
        "cooperative-sticky, unequal": {
            "cluster": _cluster(4),
            "consumer_group": _group("cooperative-sticky", True),
        },
        "rack-optimal, equal": {"cluster": _cluster(4), "consumer_group": _group("rack-optimal", False)},
        "streams high-availability": {
            "cluster": _cluster(2),
            "streams_app": {
                "application_id": "app",
                "assignor": "high-availability",
                "subtopologies": [{"id": "0", "source_topics": ["t"]}],
                "clients": [{"process_id": "p1", "rack": "a"}, {"process_id": "p2", "rack": "b"}],
            },
        },
    }


#: The children's environment (:func:`main` sets the bytecode policy).
ENV = dict(os.environ)
#: The children's interpreter and working directory: this one in the repository (the development
#: install), until :func:`use_installed` switches them to a venv with the built wheel.
CHILD = {"python": sys.executable, "cwd": str(ROOT)}


def use_installed(scratch: Path) -> None:
    """Run the children in a venv with rackplan's built wheel installed, from a directory outside the
    repository (:mod:`bench.installed`): as a user runs the command, without the development venv's
    editable finder, which costs every interpreter start there, the floor's included (module docstring)."""
    from bench.installed import install

    env = install(scratch)
    CHILD.update(python=str(env.python), cwd=str(env.cwd))
    ENV.pop("PYTHONPATH", None)


def use_bytecode(cache: str | None) -> None:
    """The children's bytecode policy: cached under ``cache`` as an installed wheel has it, or (None)
    ``PYTHONDONTWRITEBYTECODE``, every project module compiled on every run."""
    if cache is None:
        ENV["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        ENV["PYTHONPYCACHEPREFIX"] = cache


def floor_argv(path: Path) -> list[str]:
    """The floor on that instance file: a fresh interpreter reading it, ``json.loads``, ``json.dumps``."""
    return [CHILD["python"], "-c", _FLOOR, str(path)]


def assign_argv(path: Path) -> list[str]:
    """``rackplan assign FILE`` as the console script runs it."""
    return [CHILD["python"], "-c", _ASSIGN, "assign", str(path)]


def _run(args: list[str]) -> tuple[float, float, str]:
    """One fresh interpreter: wall seconds, CPU seconds (user + system of the child), its stderr."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=CHILD["cwd"], env=ENV
    )
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{args} exited {os.waitstatus_to_exitcode(status)}: {err[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime, err


def _medians(runs: list[tuple[float, float, str]]) -> tuple[float, float]:
    """Median wall and CPU seconds of some runs of :func:`_run`."""
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def timed(args: list[str], repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``repeats`` runs (one discarded first run warms the page cache)."""
    _run(args)
    return _medians([_run(args) for _ in range(repeats)])


def timed_pair(
    first: list[str], second: list[str], repeats: int
) -> tuple[tuple[float, float], tuple[float, float]]:
    """:func:`timed` of two commands, their runs interleaved (one discarded first run each): a ratio of
    the two is then not skewed by the machine drifting between one command's runs and the other's."""
    _run(first)
    _run(second)
    runs = [(_run(first), _run(second)) for _ in range(repeats)]
    return _medians([a for a, _ in runs]), _medians([b for _, b in runs])


def modules(code: str, argv: list[str]) -> set[str]:
    """The modules a run of ``code`` holds at exit."""
    err = _run([CHILD["python"], "-c", _MODULES + code, *argv])[2]
    return set(err.rsplit("@@", 1)[1].split())


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--no-bytecode", action="store_true", help="compile every module on every run")
    ap.add_argument(
        "--editable", action="store_true", help="this development venv (editable finder) instead of the wheel"
    )
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as scratch:
        use_bytecode(None if args.no_bytecode else cache)
        if not args.editable:
            use_installed(Path(scratch))
        print(f"interpreter: {CHILD['python']} (from {CHILD['cwd']})")
        return _table(args.repeats)


def _table(repeats: int) -> int:
    bare = modules("pass", [])
    cpu_pass = timed([CHILD["python"], "-c", "pass"], repeats)
    print(
        f"python -c pass: wall {cpu_pass[0] * 1000:.0f} ms, CPU {cpu_pass[1] * 1000:.0f} ms, {len(bare)} modules"
    )
    print()
    print(
        "| case | floor CPU ms | assign CPU ms | ratio | floor wall ms | assign wall ms | modules | rackplan modules | solvers |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, doc in cases().items():
            path = Path(tmp) / "instance.json"
            path.write_text(json.dumps(doc))
            floor, assign = timed_pair(floor_argv(path), assign_argv(path), repeats)
            loaded = modules(_ASSIGN, ["assign", str(path)]) - bare
            ours = sorted(m for m in loaded if m.startswith("rackplan"))
            solvers = [s for s in SOLVERS if s in loaded] or ["none"]
            print(
                f"| {name} | {floor[1] * 1000:.0f} | {assign[1] * 1000:.0f} | {assign[1] / floor[1]:.2f} "
                f"| {floor[0] * 1000:.0f} | {assign[0] * 1000:.0f} | {len(loaded)} | {len(ours)} | {', '.join(solvers)} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
