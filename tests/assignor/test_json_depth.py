"""The documented nesting bound is exact: 100,000 levels are accepted, 100,001 exit 2.

The deep decoder ran under a recursion limit of ``MAX_DEPTH + 50``, which also
counts the frames calling it, so documents up to about 100,041 levels were
accepted; and a document with an integer too long for ``int`` that was
deeper than the default recursion limit (but far from the bound) was refused
as "nested deeper than 100000 levels".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rackplan.assignor.cli import MAX_DEPTH, decode, nesting_depth
from rackplan.cli import main

#: the error line of a document nested too deeply
TOO_DEEP = f"rackplan: error: (document): JSON nested deeper than {MAX_DEPTH} levels\n"


def _doc() -> dict[str, Any]:
    return {
        "cluster": {"brokers": [{"id": 1, "rack": "a"}], "topics": {"in": [[1], [1]]}},
        "streams_app": {
            "application_id": "app",
            "subtopologies": [{"id": "0", "source_topics": ["in"]}],
            "clients": [{"process_id": "p1", "rack": "a"}],
        },
        "ignored": 0,
    }


def _with_ignored(text: str) -> bytes:
    """The instance with ``ignored`` replaced by ``text`` (the root object is one level more)."""
    return json.dumps(_doc()).replace('"ignored": 0', f'"ignored": {text}').encode()


def _assign(data: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    path = tmp_path / "in.json"
    path.write_bytes(data)
    code = main(["assign", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 2, MAX_DEPTH + 41])
def test_the_depth_bound_is_exact(depth: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nested = "[" * (depth - 1) + "]" * (depth - 1)
    data = _with_ignored(nested)
    assert nesting_depth(data.decode()) == depth
    code, out, err = _assign(data, tmp_path, capsys)
    if depth <= MAX_DEPTH:
        assert (code, err) == (0, "")
        assert json.loads(out)["streams_app"]["assignment"]["p1"]["active"] == ["0_0", "0_1"]
    else:
        assert (code, out, err) == (2, "", TOO_DEEP)


def test_objects_count_as_levels_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """50,000 ``{"a": [`` pairs inside the root object: 100,001 levels, one too many."""
    pairs = MAX_DEPTH // 2
    data = _with_ignored('{"a": [' * pairs + "]}" * pairs)
    assert nesting_depth(data.decode()) == MAX_DEPTH + 1
    assert _assign(data, tmp_path, capsys) == (2, "", TOO_DEEP)


def test_a_huge_integer_beside_moderate_nesting_is_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An integer too long for ``int`` and 1,500 levels (both in an ignored field): a plan, not "too deep"."""
    data = _with_ignored("[" + "7" * 5_000 + ", " + "[" * 1_500 + "]" * 1_500 + "]")
    code, out, err = _assign(data, tmp_path, capsys)
    assert (code, err) == (0, "")
    assert json.loads(out)["stats"]["tasks"] == 2


def test_brackets_inside_strings_are_not_levels() -> None:
    text = '{"k\\"[": ["[[[", "\\\\", {"]]": "}{"}], "x": "\\"{"}'
    assert nesting_depth(text) == 3
    assert nesting_depth("1") == 0 and nesting_depth('"[["') == 0 and nesting_depth("[]") == 1


def test_a_recursion_limit_above_the_bound_does_not_lift_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the recursion limit exceeds the bound (here: a bound of 5 under the default limit), the
    decoder alone no longer stops at it: the depth is counted on the common path too."""
    monkeypatch.setattr("rackplan.assignor.cli.MAX_DEPTH", 5)
    assert decode(b"[[[[[1]]]]]")[0] == [[[[[1]]]]]
    with pytest.raises(RecursionError):
        decode(b"[[[[[[1]]]]]]")
