"""The agent's settings: section models, the YAML file and the environment, one-line errors, contract checks.

Rank 3 (docs/architecture.md): imports :mod:`rackplan.agent.kafka`, :mod:`rackplan.agent.core`,
:mod:`rackplan.agent.protocol` and the assignor's parser.  The fleet job's settings reuse
:mod:`.environment`, :mod:`.yaml_file` and :mod:`.errors`.
"""

__all__ = [
    "contract_checks",
    "environment",
    "errors",
    "ha",
    "headers",
    "section_base",
    "sections",
    "traffic",
    "yaml_file",
]
