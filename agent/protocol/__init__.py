"""The records of rackplan's control topics, in one place: what the agent, its followers and clients exchange.

* :mod:`.records`: the bounded JSON decoder every record goes through (size and
  nesting limits, skip reasons) and the bound on counters;
* :mod:`.plans`: plan records (plan topic), keys ``consumer/<group>`` / ``streams/<app>``;
* :mod:`.registrations`: registration records (registrations topic), signatures;
* :mod:`.lease`: the leader's heartbeat (lease topic);
* :mod:`.alerts`: locality alert events (alerts topic);
* :mod:`.models`: the same values as pydantic models, whose JSON Schemas are
  :mod:`.schemas` (shipped in the package, copied to docs/).

Encoders stay hand-written (fixed key order, separators, ``ensure_ascii``):
plans are fingerprinted and the Java clients parse the bytes.  Nothing here
imports Kafka, the settings or the planner: a plan follower loads this package
and the Kafka client only.
"""
