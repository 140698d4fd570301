"""``python -m rackplan.agent.protocol.schemas [--write]``: check (or regenerate) the schema files.

Writes the copies in this package and, in a source checkout, in docs/.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import FILES, render


def targets() -> list[Path]:
    """This package's folder, and the checkout's docs/ when this package lives in one."""
    here = Path(__file__).resolve().parent
    out = [here]
    docs = here.parents[2] / "docs"  # agent/protocol/schemas -> the checkout's root
    if (docs / "CONTRACT.md").is_file():
        out.append(docs)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rackplan.agent.protocol.schemas", description=__doc__)
    parser.add_argument("--write", action="store_true", help="regenerate the files instead of checking them")
    args = parser.parse_args(argv)
    stale = []
    for folder in targets():
        for spec in FILES:
            path = folder / spec.name
            text = render(spec)
            current = path.read_text(encoding="utf-8") if path.is_file() else None
            if current == text:
                continue
            if args.write:
                path.write_text(text, encoding="utf-8")
                print(f"wrote {path}")
            else:
                stale.append(path)
    for path in stale:
        print(
            f"{path}: differs from what the models generate (python -m rackplan.agent.protocol.schemas --write)",
            file=sys.stderr,
        )
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
