"""Run every benchmark in bench/ (``make bench``); each prints its own table."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main() -> int:
    names = sorted(
        m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name.startswith("bench_")
    )
    for name in names:
        print(f"== bench/{name}.py", flush=True)
        module = importlib.import_module(f"bench.{name}")
        code = module.main([]) if hasattr(module, "main") else 0
        if code:
            return int(code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
