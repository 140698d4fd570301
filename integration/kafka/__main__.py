"""``python -m integration.kafka up [--dir DIR]``: the compose file's cluster on loopback, until Ctrl-C."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from integration.kafka.cluster import LauncherError, main_up
from integration.kafka.compose import COMPOSE_FILE, ComposeError


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m integration.kafka", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the cluster, print its bootstrap, stop on Ctrl-C")
    up.add_argument("--dir", type=Path, default=None, help="data and logs here (default: a temporary folder)")
    up.add_argument(
        "--compose", type=Path, default=COMPOSE_FILE, help="the compose file to derive brokers from"
    )
    args = p.parse_args(argv)
    try:
        return main_up(args.dir, args.compose)
    except (LauncherError, ComposeError) as e:
        print(f"integration.kafka: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
