"""rackplan's own Kafka clients: topic admin, tails, read-back, the transactional publisher, error decisions.

Rank 2: imports :mod:`.core` and :mod:`rackplan.agent.protocol`, never the settings (a plan follower
loads this package).  :mod:`.embedded` is librdkafka's mock cluster (tests, the demo);
:mod:`.isolated_admin` runs admin requests in a child process.
"""

__all__ = ["embedded", "errors", "isolated_admin", "metadata_refresh", "publisher", "timeouts"]
