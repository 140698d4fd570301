"""Shared fixtures: where the shared contract material lives."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not (SHARED / "CONTRACT.md").exists():
        pytest.skip(f"shared contract material not found at {SHARED}")
    return SHARED
