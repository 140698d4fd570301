"""``rackplan assign`` imports only the path an instance takes (issue 29, item 3: start-up).

Each case runs the command in a fresh interpreter (``sys.modules`` is per
process) and lists what it imported: the solvers (numpy, highspy, networkx) and
the assignor modules a small range or equal cooperative-sticky group never uses
must not be among them, so a module-level import that drags them in fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

#: Runs the console script's entry point, then prints every module loaded.
_CHILD = (
    "import sys\n"
    "from rackplan.cli import main\n"
    "code = main(['assign', sys.argv[1]])\n"
    "sys.stderr.write('\\n@@' + ' '.join(sorted(sys.modules)))\n"
    "sys.exit(code)\n"
)
SOLVERS = ("numpy", "highspy", "networkx", "scipy")
#: What neither a range group nor an equal cooperative-sticky one needs: the unequal path, its exact
#: candidate's integer programs, rack-optimal, Streams, the traffic figures of an instance without traffic.
UNUSED = (
    "rackplan.assignor.consumer.sticky.general",
    "rackplan.assignor.consumer.rack_optimal",
    "rackplan.assignor.flow.highs",
    "rackplan.assignor.streams",
    "rackplan.assignor.traffic",
)
#: What an equal rack-optimal group without traffic needs none of: the exact step for unequal
#: subscriptions (its programs, the cooperative-sticky search it starts from), the traffic objectives.
UNUSED_RACK_OPTIMAL = (
    "rackplan.assignor.consumer.sticky",
    "rackplan.assignor.consumer.rack_optimal.balanced",
    "rackplan.assignor.consumer.rack_optimal.milp",
    "rackplan.assignor.consumer.rack_optimal.bytes_objective",
    "rackplan.assignor.consumer.rack_optimal.load_balance",
    "rackplan.assignor.flow.highs",
    "rackplan.assignor.traffic",
)


def _group(assignor: str) -> dict[str, Any]:
    return {
        "cluster": {
            "brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}],
            "topics": {"t": [[1], [2], [1], [2]]},
        },
        "consumer_group": {
            "group_id": "g",
            "assignor": assignor,
            "members": [
                {"member_id": "m1", "rack": "a", "topics": ["t"], "owned": [["t", 0]], "generation": 1},
                {"member_id": "m2", "rack": "b", "topics": ["t"]},
            ],
        },
    }


def _imported(tmp_path: Path, doc: dict[str, Any]) -> list[str]:
    path = tmp_path / "instance.json"
    path.write_text(json.dumps(doc))
    run = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert (out.get("consumer_group") or out["streams_app"])["assignment"]  # a real plan was written
    return run.stderr.rsplit("@@", 1)[1].split()


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_a_small_group_imports_no_solver_it_does_not_use(tmp_path: Path, assignor: str) -> None:
    modules = _imported(tmp_path, _group(assignor))
    assert [m for m in modules if m.split(".")[0] in SOLVERS] == []
    assert [m for m in modules if m.startswith(UNUSED)] == []


def test_an_equal_rack_optimal_group_imports_only_the_fair_optimum(tmp_path: Path) -> None:
    modules = _imported(tmp_path, _group("rack-optimal"))
    assert [m for m in modules if m.split(".")[0] in SOLVERS] == []
    assert [m for m in modules if m.startswith(UNUSED_RACK_OPTIMAL)] == []


def test_a_tiny_unequal_group_solves_its_exact_candidate_without_numpy_or_highs(tmp_path: Path) -> None:
    """bench_startup's unequal cooperative-sticky case: the exact candidate runs (its start, the search's plan,
    is not at the per-partition floor) and is answered by the flow enumeration (``small_exact``), so the
    0.14 s of importing numpy and highspy is not paid."""
    from bench.bench_startup import cases

    modules = _imported(tmp_path, cases()["cooperative-sticky, unequal"])
    assert "rackplan.assignor.consumer.rack_optimal.small_exact" in modules
    assert [m for m in modules if m.split(".")[0] in SOLVERS] == []
    assert "rackplan.assignor.flow.highs" not in modules


def test_a_group_that_needs_highs_loads_it_without_numpy(tmp_path: Path) -> None:
    """The first of bench_exact_candidate's 9 x 96 family: its exact candidate goes to HiGHS (the
    enumeration's budget runs out on a model under ``EXACT_NONZEROS``), which gets the program as an
    MPS file, so highspy's package (its ``__init__`` imports numpy, about 0.3 s of CPU) is not run."""
    from bench.bench_exact_candidate import small_unequal
    from bench.vs_kafka_cases import consumer_doc

    cluster, group = next(iter(small_unequal(1)))
    modules = _imported(tmp_path, consumer_doc(cluster, group))
    assert {"rackplan.assignor.flow.highs", "highspy._core"} <= set(modules)
    assert [m for m in modules if m.split(".")[0] == "numpy"] == []
    assert "highspy.highs" not in modules
    # the program file's directory is made without tempfile (which imports shutil, random, bz2, lzma)
    assert [m for m in ("tempfile", "shutil", "random", "bz2", "lzma") if m in modules] == []


def test_a_streams_app_with_one_spread_key_loads_neither_logging_nor_the_standby_program(
    tmp_path: Path,
) -> None:
    """bench_startup's high-availability app: its rack optimisation runs and its standbys have one spread
    key, so the stdlib's logging (for warnings it does not give) and the several-keys integer program
    (``standby_milp``, HiGHS's door) stay unimported; it has no traffic and does not weigh by it, so
    neither do the traffic figures and the contract's task-partition map (session 37)."""
    from bench.bench_startup import cases

    modules = _imported(tmp_path, cases()["streams high-availability"])
    assert "rackplan.assignor.streams.ha" in modules
    assert [m for m in modules if m.split(".")[0] in SOLVERS] == []
    for unused in (
        "logging",
        "rackplan.assignor.streams.standby_milp",
        "rackplan.assignor.flow.highs",
        "rackplan.assignor.traffic",
        "rackplan.assignor.contract",
    ):
        assert unused not in modules


def test_a_streams_app_with_traffic_still_reports_its_bytes(tmp_path: Path) -> None:
    """The other side of the lazy import: with traffic in the cluster the figures are computed (the
    traffic module is loaded where they are) and the plan's statistics carry them."""
    from bench.bench_startup import cases

    doc = cases()["streams high-availability"]
    doc["cluster"]["traffic"] = {"t": [1000.0, 2000.0]}
    path = tmp_path / "instance.json"
    path.write_text(json.dumps(doc))
    run = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "rackplan.assignor.traffic" in run.stderr.rsplit("@@", 1)[1].split()
    stats = json.loads(run.stdout)["stats"]
    assert {"active_cross_rack_bytes_per_s", "standby_cross_rack_bytes_per_s"} <= set(stats), stats


#: What no small instance's path needs, and what it cost to import (issue 29, docs/performance.md):
#: ``dataclasses`` brings ``inspect`` (``ast``, ``dis``, ``tokenize``); argparse's default formatter ``shutil``;
#: ``typing`` and the parser (``argparse``, which brings ``gettext``) cost about 5 ms of CPU each.
STARTUP_HEAVY: tuple[str, ...] = ("dataclasses", "inspect", "ast", "dis", "tokenize", "shutil")
STARTUP_HEAVY += ("typing", "argparse", "gettext")


@pytest.mark.parametrize(
    "case",
    [
        "range, 1 partition",
        "cooperative-sticky, equal",
        "cooperative-sticky, unequal",
        "rack-optimal, equal",
        "streams high-availability",
    ],
)
def test_no_path_of_a_small_instance_imports_dataclasses_inspect_ast_shutil_typing_or_argparse(
    tmp_path: Path, case: str
) -> None:
    """Every case of bench_startup: the assignors' records are ``rackplan.assignor.record`` (no ``dataclasses``,
    so no ``inspect``), package surfaces are read without ``ast``, the parser's help formatter takes its
    width without ``shutil``, ``typing`` is imported only under ``TYPE_CHECKING`` (its protocols and
    ``NamedTuple`` included), and ``rackplan assign FILE`` runs without the parser (``argparse``, and
    with it ``gettext``); a module that brings one back fails here."""
    from bench.bench_startup import cases

    modules = _imported(tmp_path, cases()[case])
    assert [m for m in STARTUP_HEAVY if m in modules] == []
