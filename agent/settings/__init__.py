"""The agent's settings: section models, the YAML file and environment sources, error rendering.

Rank 3: imports :mod:`.kafka`, :mod:`.core`, :mod:`rackplan.agent.protocol` and the assignor's parser.
"""

__all__ = ["headers", "sections"]
