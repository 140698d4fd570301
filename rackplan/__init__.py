"""rackplan: rack-locality planning for Apache Kafka consumer groups and Kafka Streams apps.

One distribution, one top-level import name.  The required top-level folders
of the source tree are its subpackages (``rackplan/agent`` and friends are
links to them, and the wheel holds real copies):

- :mod:`rackplan.assignor`: pure assignment algorithms, no I/O;
- :mod:`rackplan.agent`: the sidecar that wires Kafka I/O around them;
- :mod:`rackplan.fleet`: the Spark what-if pipeline, on top of both;
- :mod:`rackplan.cli`: the composition root of the ``rackplan`` command.

Imports only go down that list's dependency order: assignor <- agent <- fleet
<- cli (docs/architecture.md; ``tests/test_architecture.py`` checks it).
"""

from __future__ import annotations


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rackplan")
    except PackageNotFoundError:
        return "0+unknown"


def __getattr__(name: str) -> str:
    """``__version__``, looked up on first use: ``importlib.metadata`` costs a third of
    ``rackplan assign``'s start-up on a small instance, and only ``--version`` needs it."""
    if name == "__version__":
        return _version()
    raise AttributeError(f"module 'rackplan' has no attribute {name!r}")


__all__ = ["__version__"]
