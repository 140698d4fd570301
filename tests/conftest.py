"""Shared fixtures: where the shared contract material lives; logging as each test found it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"


def require_shared() -> Path:
    """``../shared`` (the binding contract, its samples and checker), or a loud failure.

    Tests that judge rackplan against the contract must not pass by skipping when it is missing.
    """
    if not (SHARED / "CONTRACT.md").exists():
        pytest.fail(
            f"shared contract material not found at {SHARED} (CONTRACT.md, samples/, tools/check_plan.py): "
            "the contract tests need it next to the repository",
            pytrace=False,
        )
    return SHARED


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return require_shared()


@pytest.fixture(autouse=True)
def logging_as_found() -> Iterator[None]:
    """Each test leaves structlog and the ``rackplan`` stdlib logger as it found them.

    Commands under test configure logging for the whole process
    (:func:`rackplan.agent.core.logging.configure`: ``rackplan plans`` sets the level to error, its
    stream to stderr).  Left so, the level filters events before ``structlog.testing.capture_logs``
    sees them, and a later test in the same worker that asserts on an info event finds none: which
    tests share a worker depends on how ``-n`` deals the files.
    """
    saved = structlog.get_config()
    root = logging.getLogger("rackplan")
    handlers, level, propagate = list(root.handlers), root.level, root.propagate
    yield
    structlog.configure(**saved)
    root.handlers[:] = handlers
    root.setLevel(level)
    root.propagate = propagate
