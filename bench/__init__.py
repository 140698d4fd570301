"""Benchmark scripts (never timed unit tests); a package so they share :mod:`bench.common` and run with ``-m``."""
