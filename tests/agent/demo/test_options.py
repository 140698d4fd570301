"""``rackplan demo`` refuses the options it cannot honour by their names, and its agent reads no environment.

Found by an adversarial hunt: ``--log-file /tmp`` and ``--log-file /no/such/dir/x.log`` ended in
"internal error"; ``--poll-interval 30`` ran 50 s into "internal error: TimeoutError"; a refused option
left an empty ``rackplan-demo-*.log`` behind; and ``RACKPLAN_*`` variables overrode the demo's own
settings (``RACKPLAN_MODE=observe``: the demo said "Republished plans" while it published nothing).
"""

from __future__ import annotations

import argparse
import json
import queue
import threading
import time
from pathlib import Path

import pytest

from rackplan.agent import commands
from rackplan.agent.demo import run as demo_run
from rackplan.agent.demo.options import DemoFailed, ignored_variables
from rackplan.agent.demo.run import demo_settings
from tests.agent.runtime.test_startup import refused, run


def no_temp_files(tmp: Path) -> dict[str, str]:
    """The environment of a demo whose temp directory is ``tmp`` (its default log file goes there)."""
    tmp.mkdir(exist_ok=True)
    return {"TMPDIR": str(tmp)}


@pytest.mark.parametrize(
    ("where", "why"), [("no/such/dir/demo.log", "No such file or directory"), (".", "Is a directory")]
)
def test_a_log_file_the_demo_cannot_write_is_refused_naming_the_option(
    tmp_path: Path, where: str, why: str
) -> None:
    path = str(tmp_path / where)
    line = refused(run("demo", "--log-file", path, env=no_temp_files(tmp_path / "tmp")))
    assert line == f"rackplan: error: demo: --log-file {path}: {why}"


@pytest.mark.parametrize("interval", ["30", "0.01", "nan", "inf"])
def test_a_poll_interval_the_demo_cannot_show_is_refused_naming_it_and_leaves_no_log(
    tmp_path: Path, interval: str
) -> None:
    tmp = tmp_path / "tmp"
    started = time.monotonic()
    line = refused(run("demo", "--poll-interval", interval, env=no_temp_files(tmp), timeout=80))
    assert line.startswith("rackplan: error: demo: --poll-interval: 0.1 to 5 seconds"), line
    assert time.monotonic() - started < 30, "refused before the cluster started"
    assert list(tmp.iterdir()) == [], "no rackplan-demo-*.log of a demo that never ran"


def test_the_demo_agents_settings_read_no_rackplan_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "RACKPLAN_MODE": "observe",
        "RACKPLAN_POLL_INTERVAL_S": "100",
        "RACKPLAN_PLAN_TOPIC": "elsewhere",
        "RACKPLAN_NOPE": "1",
        "RACKPLAN_DEBUG": "1",  # the command's own, not a setting
    }.items():
        monkeypatch.setenv(name, value)
    settings, _notes = demo_settings("127.0.0.1:1", 0.5, "info")
    assert (settings.mode, settings.poll_interval_s, settings.plan_topic) == ("act", 0.5, "_rackplan.plans")
    assert ignored_variables() == [
        "RACKPLAN_MODE",
        "RACKPLAN_NOPE",
        "RACKPLAN_PLAN_TOPIC",
        "RACKPLAN_POLL_INTERVAL_S",
    ]


def test_the_demo_shows_what_its_agent_did_whatever_the_environment_says(tmp_path: Path) -> None:
    log = tmp_path / "demo.log"
    env = {"RACKPLAN_MODE": "observe", "RACKPLAN_POLL_INTERVAL_S": "100"}
    p = run("demo", "--log-file", str(log), env=env, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "note         not read: RACKPLAN_MODE, RACKPLAN_POLL_INTERVAL_S" in p.stdout, p.stdout
    assert "3. Republished plans" in p.stdout and "the agent polls every 0.5 s" in p.stdout
    events = [json.loads(line)["event"] for line in log.read_text().splitlines() if line.startswith("{")]
    assert "plan published" in events and "plan withheld" not in events


def test_a_demo_that_does_not_see_its_cycles_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    idle = threading.Thread(target=lambda: None)
    idle.start()
    idle.join()
    with pytest.raises(DemoFailed, match="the agent stopped unexpectedly"):
        demo_run._wait(queue.Queue(), lambda r: True, time.monotonic() + 5, idle)
    alive = threading.Thread(target=time.sleep, args=(2,), daemon=True)
    alive.start()
    with pytest.raises(DemoFailed, match="did not show the expected cycle in time"):
        demo_run._wait(queue.Queue(), lambda r: True, time.monotonic() + 0.3, alive)

    def fails(**_kwargs: object) -> int:
        raise DemoFailed("the agent did not show the expected cycle in time; see the agent log named above")

    monkeypatch.setattr(demo_run, "run_demo", fails)
    args = argparse.Namespace(poll_interval=0.5, keep_running=False, log_level="info", log_file=None)
    assert commands.cmd_demo(args) == 1
    assert capsys.readouterr().err.splitlines() == [
        "rackplan: error: demo: the agent did not show the expected cycle in time; see the agent log named above"
    ]
