"""The agent's exceptions: one base, :class:`rackplan.agent.core.errors.AgentError` (agent/core/errors.py)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import rackplan.agent
from rackplan.agent.core.errors import AgentError, CannotRun


def _agent_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(rackplan.agent.__path__, "rackplan.agent."):
        if info.name.endswith("__main__"):
            continue  # running it is what importing it does
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                found[f"{info.name}.{name}"] = obj
    return found


def test_every_exception_the_agent_defines_derives_from_agent_error() -> None:
    found = _agent_exceptions()
    assert len(found) >= 25, sorted(found)  # the walk saw the agent, not an empty package
    assert sorted(n for n, cls in found.items() if not issubclass(cls, AgentError)) == []


def test_the_bases_callers_already_catch_are_kept() -> None:
    # Derived from AgentError as well, never instead: ``except ValueError`` and ``except RuntimeError``
    # around these still catch them.
    from rackplan.agent.cluster.metadata import MetadataError
    from rackplan.agent.kafka.exceptions import PublishError, TopicReadError
    from rackplan.agent.protocol.plans import PlanDecodeError
    from rackplan.agent.protocol.records import RecordError
    from rackplan.agent.settings.errors import SettingsError

    values: tuple[type[Exception], ...] = (PlanDecodeError, RecordError, SettingsError)
    runtimes: tuple[type[Exception], ...] = (CannotRun, PublishError, TopicReadError, MetadataError)
    assert all(issubclass(c, ValueError) for c in values) and all(
        issubclass(c, RuntimeError) for c in runtimes
    )
    # a bug stays a bug
    assert not issubclass(AssertionError, AgentError) and not issubclass(TypeError, AgentError)
