"""rackplan's sidecar agent: Kafka I/O wired around the pure assignors (docs/architecture.md)."""

if __name__ != "rackplan.agent":  # one copy of every module: never both ``agent.x`` and ``rackplan.agent.x``
    raise ImportError(
        f"import rackplan.agent, not {__name__} (the distribution's only top-level name is rackplan)"
    )
