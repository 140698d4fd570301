"""Wrong-typed optional Streams fields exit 2 naming the field, falsy values included; null stays "absent".

``rackplan assign`` read ``rack_aware``, a client's ``tags`` and ``task_lags``
and ``rack_aware_assignment_tags`` as ``value or {}`` (or ``[]``), so ``false``,
``0``, ``""`` and an empty container of the other kind were taken for the
empty value and accepted silently, while ``true`` or ``[1]`` were refused.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from tests.assignor.cli_run import assign_document


def _doc() -> dict[str, Any]:
    """Three racks, one stateful sub-topology, two tagged clients with lags."""
    return {
        "cluster": {
            "brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}, {"id": 3, "rack": "c"}],
            "topics": {"in": [[1], [2], [3], [1]], "log": [[2], [3], [1], [2]]},
        },
        "streams_app": {
            "application_id": "app",
            "subtopologies": [{"id": "0", "source_topics": ["in"], "changelog_topics": ["log"]}],
            "clients": [
                {"process_id": "p1", "rack": "a", "tags": {"zone": "a"}, "task_lags": {"0_0": 0}},
                {"process_id": "p2", "rack": "b", "tags": {"zone": "b"}, "task_lags": {"0_1": 5}},
            ],
            "num_standby_replicas": 1,
            "rack_aware_assignment_tags": ["zone"],
            "rack_aware": {"strategy": "min_traffic"},
        },
    }


def _set(doc: dict[str, Any], where: str, value: object) -> None:
    app = doc["streams_app"]
    if where.startswith("client."):
        app["clients"][1][where.removeprefix("client.")] = value
    else:
        app[where] = value


#: (field, its path in the message, the type the message expects)
FIELDS = [
    ("rack_aware", "streams_app.rack_aware", "an object"),
    ("rack_aware_assignment_tags", "streams_app.rack_aware_assignment_tags", "an array"),
    ("client.tags", "streams_app.clients[1].tags", "an object"),
    ("client.task_lags", "streams_app.clients[1].task_lags", "an object"),
]
FALSY = [False, 0, "", 0.0]


@pytest.mark.parametrize(("where", "path", "expected"), FIELDS, ids=[f[0] for f in FIELDS])
@pytest.mark.parametrize("value", FALSY, ids=repr)
def test_falsy_values_of_the_wrong_type_exit_2_naming_the_field(
    where: str, path: str, expected: str, value: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _doc()
    _set(doc, where, value)
    code, out, err = assign_document(doc, tmp_path, capsys)
    assert (code, out) == (2, "")
    assert re.fullmatch(rf"rackplan: error: {re.escape(path)}: expected {expected}, got \w+\n", err), err


def _without_elapsed(out: str) -> str:
    return re.sub(r'"elapsed_ms":[0-9.e+-]+', '"elapsed_ms":0', out)


@pytest.mark.parametrize(("where", "path", "expected"), FIELDS, ids=[f[0] for f in FIELDS])
def test_the_other_empty_container_exits_2_while_null_is_absent(
    where: str, path: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``[]`` for an object (``{}`` for an array) is refused; null and the right empty value mean "absent"."""
    right: object = [] if where == "rack_aware_assignment_tags" else {}
    wrong: object = {} if where == "rack_aware_assignment_tags" else []
    refused = _doc()
    _set(refused, where, wrong)
    code, out, err = assign_document(refused, tmp_path, capsys)
    assert (code, out) == (2, "")
    assert err.startswith(f"rackplan: error: {path}: expected {expected}, got "), err
    absent, with_null, empty = _doc(), _doc(), _doc()
    holder = absent["streams_app"]["clients"][1] if where.startswith("client.") else absent["streams_app"]
    del holder[where.removeprefix("client.")]
    _set(with_null, where, None)
    _set(empty, where, right)
    outputs = []
    for doc in (absent, with_null, empty):
        code, out, err = assign_document(copy.deepcopy(doc), tmp_path, capsys)
        assert (code, err) == (0, "")
        outputs.append(_without_elapsed(out))
    assert outputs[0] == outputs[1] == outputs[2]
