"""The one local Spark session of the fleet tests (Spark takes half a minute to start on two cores)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from rackplan.fleet.settings import SparkSettings


def _spark_missing() -> str | None:
    try:
        import pandas  # type: ignore[import-untyped,unused-ignore]  # noqa: F401
        import pyarrow  # type: ignore[import-untyped,unused-ignore]  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as e:
        return f"the spark extra is not installed ({e.name}): pip install -e '.[spark]'"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no java on PATH and no JAVA_HOME: Spark needs Java 17+"
    return None


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    reason = _spark_missing()
    if reason:
        pytest.skip(reason)
    from rackplan.fleet.job import build_session

    session = build_session(SparkSettings(master="local[2]", partitions=4, arrow_batch_rows=16))
    yield session
    session.stop()
