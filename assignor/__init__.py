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

The public API is the ``if TYPE_CHECKING:`` block below, the one list of its
names: mypy reads it as this package's typed attributes, and
:func:`~rackplan.assignor.surface.attach` reads the same lines to import each name
from its module on first use, so ``rackplan assign`` imports no more than the
path it takes.  Layers above import from here, not from the modules, which may
move.  Besides the planning calls it offers what the agent, the fleet job and the
command line reuse: :func:`read_bounded` and :class:`TooLargeError` (reading a
bounded input), :func:`one_line` (one-line error text), the contract's choices
(:data:`CONSUMER_ASSIGNORS`, :data:`RACK_STRATEGIES`), :func:`assign_document`
(``rackplan assign`` on a decoded document) and the ``assign`` subcommand's
pieces for :mod:`rackplan.cli` (:func:`cmd_assign`, :func:`positive_mib`,
:data:`MAX_INPUT_MIB`, :func:`write_err`).

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

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (issue 29)

if TYPE_CHECKING:
    from .bounded import TooLargeError as TooLargeError
    from .bounded import read_bounded as read_bounded
    from .cli import MAX_INPUT_MIB as MAX_INPUT_MIB
    from .cli import assign_document as assign_document
    from .cli import cmd_assign as cmd_assign
    from .cli import plan_model as plan_model
    from .cli import positive_mib as positive_mib
    from .cli import write_err as write_err
    from .consumer import consumer_document as consumer_document
    from .consumer import run_assignor as run_assignor
    from .contract import FOLLOW_UP_LIMIT as FOLLOW_UP_LIMIT
    from .contract import app_topics as app_topics
    from .contract import cluster_document as cluster_document
    from .contract import follow_up as follow_up
    from .contract import group_topics as group_topics
    from .contract import instance_document as instance_document
    from .contract import is_cross_rack as is_cross_rack
    from .contract import leader_cross_rack as leader_cross_rack
    from .contract import settle_cooperative as settle_cooperative
    from .contract import subtopologies_of as subtopologies_of
    from .contract import task_partitions as task_partitions
    from .contract import topics_of as topics_of
    from .fields import InputError as InputError
    from .fields import one_line as one_line
    from .flow import PostconditionError as PostconditionError
    from .model import CONSUMER_ASSIGNORS as CONSUMER_ASSIGNORS
    from .model import RACK_STRATEGIES as RACK_STRATEGIES
    from .model import Cluster as Cluster
    from .model import ConsumerGroup as ConsumerGroup
    from .model import ConsumerPlan as ConsumerPlan
    from .model import Member as Member
    from .model import RackAwareConfig as RackAwareConfig
    from .model import StreamsApp as StreamsApp
    from .model import StreamsClient as StreamsClient
    from .model import Subtopology as Subtopology
    from .model import TopicPartition as TopicPartition
    from .parse import parse_consumer_group as parse_consumer_group
    from .parse import parse_instance as parse_instance
    from .parse import parse_streams_app as parse_streams_app
else:
    from .surface import attach

    __getattr__, __dir__, __all__ = attach(__name__, __file__)
