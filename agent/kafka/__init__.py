"""rackplan's own Kafka clients: topics, tails and read-back, the transactional publisher, error decisions.

Rank 2 (docs/architecture.md): imports :mod:`rackplan.agent.core` and :mod:`rackplan.agent.protocol`,
never the settings (a plan follower loads this package).  :mod:`.embedded` is librdkafka's mock
cluster (tests, the demo); :mod:`.isolated_admin` runs admin requests in a child process.
"""

__all__ = [
    "broker_configs",
    "embedded",
    "errors",
    "exceptions",
    "group_offsets",
    "isolated_admin",
    "metadata_refresh",
    "offsets",
    "publisher",
    "read_back",
    "tail",
    "timeouts",
    "topics",
]
