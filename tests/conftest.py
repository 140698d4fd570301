"""Shared fixtures: where the shared contract material lives."""

from __future__ import annotations

from pathlib import Path

import pytest

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
