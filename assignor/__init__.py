"""rackplan's assignors: pure functions from a parsed instance to a plan (no Kafka client, no I/O).

Kept pure so that the CLI, the agent and the tests run the very same code on the same model.

The package, top down:

- :mod:`.model` (the immutable model), :mod:`.parse` (contract JSON -> model,
  :class:`InputError` naming the field), :mod:`.cli` (``rackplan assign``);
- :mod:`.contract`: what callers above ask of a spec (its topics, a task's
  partitions, the cross-rack judgement, the cooperative follow-up loop,
  documents of models);
- :mod:`.consumer`: the consumer-group assignors (``range_assignor``,
  ``sticky/``, ``rack_optimal/``) and their shared rules (``owned``);
- :mod:`.streams`: Kafka Streams task assignment (KIP-925);
- :mod:`.flow`: the min-cost-flow solvers and the one graph builder they all use.

Callers above (the agent, the fleet job) parse a spec once
(:func:`parse_consumer_group`, :func:`parse_streams_app`, :func:`parse_instance`),
plan it from the typed model (:func:`run_assignor` then
:func:`consumer_document`, or :func:`plan_model` for either kind) and ask
:mod:`.contract` the rest.  A :class:`PostconditionError` is a bug in an
assignor, never bad input.

The public API is :data:`__all__`, importable from here; names are loaded on
first use, so ``rackplan assign`` imports no more than the path it takes.

Example::

    >>> from rackplan.assignor import parse_instance, plan_model
    >>> doc = {
    ...     "cluster": {"brokers": [{"id": 1, "rack": "a"}], "topics": {"t": [[1]]}},
    ...     "consumer_group": {"group_id": "g", "assignor": "range",
    ...                        "members": [{"member_id": "m", "rack": "a", "topics": ["t"]}]},
    ... }
    >>> cluster, group = parse_instance(doc)
    >>> plan_model(cluster, group)["consumer_group"]["assignment"]
    {'m': [['t', 0]]}
"""

if (
    __name__ != "rackplan.assignor"
):  # one copy of every module: never both ``assignor.x`` and ``rackplan.assignor.x``
    raise ImportError(
        f"import rackplan.assignor, not {__name__} (the distribution's only top-level name is rackplan)"
    )

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cli import plan_model
    from .consumer import document as consumer_document
    from .consumer import run_assignor
    from .contract import (
        FOLLOW_UP_LIMIT,
        app_topics,
        cluster_document,
        follow_up,
        group_topics,
        instance_document,
        is_cross_rack,
        leader_cross_rack,
        settle_cooperative,
        subtopologies_of,
        task_partitions,
        topics_of,
    )
    from .flow import PostconditionError
    from .model import (
        Cluster,
        ConsumerGroup,
        ConsumerPlan,
        Member,
        RackAwareConfig,
        StreamsApp,
        StreamsClient,
        Subtopology,
        TopicPartition,
    )
    from .parse import InputError, parse_consumer_group, parse_instance, parse_streams_app

#: public name -> the module (under this package) that defines it, or (module, its name there)
_EXPORTS: dict[str, str | tuple[str, str]] = {
    "parse_instance": "parse",
    "parse_consumer_group": "parse",
    "parse_streams_app": "parse",
    "InputError": "parse",
    "plan_model": "cli",
    "run_assignor": "consumer",
    "consumer_document": ("consumer", "document"),
    "PostconditionError": "flow",
    **dict.fromkeys(
        (
            "Cluster",
            "ConsumerGroup",
            "ConsumerPlan",
            "Member",
            "RackAwareConfig",
            "StreamsApp",
            "StreamsClient",
            "Subtopology",
            "TopicPartition",
        ),
        "model",
    ),
    **dict.fromkeys(
        (
            "FOLLOW_UP_LIMIT",
            "app_topics",
            "cluster_document",
            "follow_up",
            "group_topics",
            "instance_document",
            "is_cross_rack",
            "leader_cross_rack",
            "settle_cooperative",
            "subtopologies_of",
            "task_partitions",
            "topics_of",
        ),
        "contract",
    ),
}

__all__ = [
    "FOLLOW_UP_LIMIT",
    "Cluster",
    "ConsumerGroup",
    "ConsumerPlan",
    "InputError",
    "Member",
    "PostconditionError",
    "RackAwareConfig",
    "StreamsApp",
    "StreamsClient",
    "Subtopology",
    "TopicPartition",
    "app_topics",
    "cluster_document",
    "consumer_document",
    "follow_up",
    "group_topics",
    "instance_document",
    "is_cross_rack",
    "leader_cross_rack",
    "parse_consumer_group",
    "parse_instance",
    "parse_streams_app",
    "plan_model",
    "run_assignor",
    "settle_cooperative",
    "subtopologies_of",
    "task_partitions",
    "topics_of",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (PEP 562)."""
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = (where, name) if isinstance(where, str) else where
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
