"""rackplan's assignors: pure functions from a parsed instance to a plan (no Kafka client, no I/O).

Kept pure so that the CLI, the agent and the tests run the very same code on the same model.
"""
