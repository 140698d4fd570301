"""rackplan's assignors: pure functions from a parsed instance to a plan (no Kafka client, no I/O).

Kept pure so that the CLI, the agent and the tests run the very same code on the same model.
"""

if (
    __name__ != "rackplan.assignor"
):  # one copy of every module: never both ``assignor.x`` and ``rackplan.assignor.x``
    raise ImportError(
        f"import rackplan.assignor, not {__name__} (the distribution's only top-level name is rackplan)"
    )
