"""A clean stop of a leading agent writes its last heartbeat with ``released: true`` (docs/agent.md).

Found by an adversarial hunt: with ``ha.enabled`` (the default) the term's end closed the lease tail
before the agent's close, which sent the released heartbeat only while that tail was open; so none went
out, and a successor outside the lease group waited for the stale heartbeat to age (without a lease the
same stop did write it).  Here the agent runs end to end on the embedded cluster.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from rackplan.agent.core.logging import get_logger
from rackplan.agent.demo.run import topic_creator
from rackplan.agent.ha.lease import last_heartbeat
from rackplan.agent.kafka.embedded import EmbeddedCluster
from rackplan.agent.runtime.loop import Agent
from rackplan.agent.settings.sections import Settings


def test_a_leader_stopped_cleanly_leaves_a_released_heartbeat_on_the_lease_topic() -> None:
    with EmbeddedCluster(brokers_per_rack=1, racks=3) as c:
        settings = Settings.model_validate(
            {
                "kafka": {"bootstrap_servers": c.bootstrap_servers},
                "poll_interval_s": 0.5,
                "ha": {"enabled": True, "session_timeout_s": 3.0, "agent_id": "leader-a"},
                "http": {"port": 0},
                "log": {"format": "json", "level": "warning"},
            }
        )
        agent = Agent(settings, create_missing_topics=topic_creator(c))
        cycles: list[Any] = []
        agent.on_cycle = cycles.append
        runner = threading.Thread(target=agent.run, daemon=True)
        runner.start()
        try:
            deadline = time.monotonic() + 60
            while len(cycles) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert len(cycles) >= 2 and agent.leader, "the agent never led"
            config = {"bootstrap.servers": c.bootstrap_servers}
            live = last_heartbeat(config, settings.ha.lease_topic, 10.0, get_logger("t"))
            assert live is not None and not live.released  # heartbeats while it leads
        finally:
            agent.stop.set()
            runner.join(30)
        assert not runner.is_alive()
        last = last_heartbeat(config, settings.ha.lease_topic, 10.0, get_logger("t"))
        assert last is not None
        assert (last.agent_id, last.epoch, last.released) == ("leader-a", live.epoch, True)
