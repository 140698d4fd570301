"""Counting a function's calls in a test, the function still called (the tests' one call counter)."""

from __future__ import annotations

from typing import Any

import pytest


def counting(monkeypatch: pytest.MonkeyPatch, target: object, name: str) -> list[int]:
    """Count the calls of ``<target>.<name>`` (still calling it); the count is the list's one item."""
    calls = [0]
    original = getattr(target, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, counted)
    return calls
