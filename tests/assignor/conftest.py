"""Fixtures the assignor tests share."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.assignor.test_flow_core import compiled_core

if TYPE_CHECKING:
    from rackplan.assignor.flow.compiled import Core


@pytest.fixture(scope="module")
def core() -> Core:
    """The compiled flow core (``test_flow_core``'s check: a failure where a C compiler exists but no core
    was built, a skip where none exists)."""
    return compiled_core()
