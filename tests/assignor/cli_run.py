"""``rackplan assign`` on a document, in process: what the CLI tests of single fields share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rackplan.cli import main


def assign_document(
    doc: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """The exit code, stdout and stderr of ``rackplan assign`` on ``doc`` written to a file."""
    path = tmp_path / "in.json"
    path.write_text(json.dumps(doc))
    code = main(["assign", str(path)])
    out, err = capsys.readouterr()
    return code, out, err
