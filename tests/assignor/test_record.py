"""``rackplan.assignor.record`` against ``dataclasses`` itself: the same classes, the same behaviour.

The assignors' records replaced ``@dataclass(slots=True)`` for start-up (issue 29); each test below
makes one class both ways from the same body and checks what the assignors rely on: the
constructor (positional, keyword, defaults, factories, ``init=False`` and ``__post_init__``),
equality, hashing, ``repr``, ``replace``, frozenness, slots, pickling and copying.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import pickle
import pkgutil
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, ClassVar  # noqa: F401 (dataclasses resolves the string "ClassVar" in this namespace)
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

import rackplan.assignor
from rackplan.assignor.record import FIELDS, FrozenInstanceError, field, record, replace


def _body() -> dict[str, Any]:
    """One class body: a plain field, a default, a factory, a computed field, a class constant, a method."""

    def __post_init__(self: Any) -> None:
        object.__setattr__(self, "total", self.a + self.b + len(self.tags))

    def doubled(self: Any) -> int:
        return 2 * int(self.a)

    return {
        "__annotations__": {
            "a": "int",
            "b": "int",
            "tags": "list[str]",
            "total": "int",
            "LIMIT": "ClassVar[int]",
        },
        "b": 7,
        "LIMIT": 3,
        "__post_init__": __post_init__,
        "doubled": doubled,
        "__module__": __name__,
        "__qualname__": "Point",
    }


def _ours(frozen: bool) -> Any:
    """The class as a record."""
    ours = _body()
    ours["tags"] = field(default_factory=list)
    ours["total"] = field(init=False)
    return record(frozen=frozen)(type("Point", (), ours))


def _both(frozen: bool) -> tuple[Any, Any]:
    """The same class as a record and as a dataclass."""
    theirs = _body()
    theirs["tags"] = dataclasses.field(default_factory=list)
    theirs["total"] = dataclasses.field(init=False)
    made_theirs: Any = dataclasses.dataclass(frozen=frozen, slots=True)(type("Point", (), theirs))
    return _ours(frozen), made_theirs


def _outcome(f: Callable[[], object]) -> object:
    """A call's value, or the type of what it raised (messages differ; the kind must not)."""
    try:
        return f()
    except FrozenInstanceError:
        return "frozen"
    except dataclasses.FrozenInstanceError:
        return "frozen"
    except Exception as e:
        return type(e).__name__


values = st.integers(-5, 5)
tag_lists = st.lists(st.sampled_from(["x", "y"]), max_size=2)


@given(frozen=st.booleans(), a=values, b=values, tags=tag_lists, a2=values, b2=values, tags2=tag_lists)
def test_a_record_behaves_as_the_same_dataclass(
    frozen: bool, a: int, b: int, tags: list[str], a2: int, b2: int, tags2: list[str]
) -> None:
    ours, theirs = _both(frozen)
    x, y = ours(a, b, tags), ours(a2, b=b2, tags=tags2)
    dx, dy = theirs(a, b, tags), theirs(a2, b=b2, tags=tags2)
    assert repr(x) == repr(dx) and repr(y) == repr(dy)
    assert (x == y) == (dx == dy) and (x != y) == (dx != dy)
    assert x.total == dx.total and x.doubled() == dx.doubled() and ours.LIMIT == theirs.LIMIT == 3
    assert (x == dx) is False  # another class is never equal, as with dataclasses
    assert _outcome(lambda: hash(x) == hash(y)) == _outcome(lambda: hash(dx) == hash(dy))
    assert _outcome(lambda: ours(a).tags) == _outcome(lambda: theirs(a).tags) == []
    assert ours(a).tags is not ours(a).tags  # a fresh list per instance
    assert ours.__match_args__ == theirs.__match_args__ == ("a", "b", "tags")
    assert set(ours.__slots__) == set(theirs.__slots__) and not hasattr(x, "__dict__")
    for name in ("a", "total"):
        assert _outcome(partial(setattr, x, name, 1)) == _outcome(partial(setattr, dx, name, 1))
    with pytest.raises(
        AttributeError
    ):  # no such slot (frozen: refused first; 3.11's dataclass raises TypeError)
        x.other = 1
    assert _outcome(lambda: delattr(x, "a")) == _outcome(lambda: delattr(dx, "a"))
    moved = replace(y, a=a)
    assert repr(moved) == repr(dataclasses.replace(dy, a=a)) and moved.total == a + b2 + len(tags2)
    assert _outcome(lambda: replace(y, total=1)) == _outcome(lambda: dataclasses.replace(dy, total=1))
    assert _outcome(lambda: ours()) == _outcome(lambda: theirs()) == "TypeError"
    assert _outcome(lambda: ours(1, 2, [], 4)) == _outcome(lambda: theirs(1, 2, [], 4)) == "TypeError"


@pytest.mark.parametrize("frozen", [True, False])
def test_records_pickle_and_copy_like_dataclasses(frozen: bool) -> None:
    """Spark ships records between processes (the fleet job): pickling and copying keep every field."""
    globals()["Point"], _ = _both(frozen)  # pickle finds the class by its module and name
    try:
        p = globals()["Point"](1, 2, ["x"])
        for back in (pickle.loads(pickle.dumps(p)), copy.copy(p), copy.deepcopy(p)):
            assert back == p and back.total == p.total and type(back) is type(p)
    finally:
        del globals()["Point"]


@pytest.mark.parametrize("frozen", [True, False])
def test_methods_are_compiled_on_first_call_once(frozen: bool) -> None:
    """Issue 29 (start-up): making a record compiles nothing; a method's first call compiles it and puts
    it on the class, so later calls go to it directly, and nothing compiles twice."""
    with mock.patch("builtins.exec", side_effect=AssertionError("compiled at class creation")):
        ours = _ours(frozen)
    methods = ["__init__", "__repr__", "__eq__"] + (["__hash__"] if frozen else [])
    stubs = {name: vars(ours)[name] for name in methods}
    with pytest.raises(TypeError):  # a wrong first call compiles too, and fails as the method does
        ours()
    x = ours(1, 2, ("x",))  # a tuple: hashable when frozen
    assert (repr(x), x == ours(1, 2, ("x",))) == ("Point(a=1, b=2, tags=('x',), total=4)", True)
    if frozen:
        assert hash(x) == hash(ours(1, 2, ("x",)))
    for name in methods:
        assert vars(ours)[name] is not stubs[name] and vars(ours)[name].__qualname__ == f"Point.{name}"
    with mock.patch("builtins.exec", side_effect=AssertionError("compiled twice")):
        y = ours(1, 2, ("x",))
        assert repr(y) == repr(x) and y == x and (not frozen or hash(y) == hash(x))
    assert vars(ours)["__hash__"] is None or frozen


def test_a_field_without_default_after_one_with_is_refused_as_dataclasses_does() -> None:
    body = {"__annotations__": {"a": "int", "b": "int"}, "a": 1, "__module__": __name__}
    with pytest.raises(TypeError, match="non-default field 'b' follows a default field"):
        record()(type("Bad", (), dict(body)))
    with pytest.raises(TypeError):
        dataclasses.dataclass(type("Bad", (), dict(body)))
    with pytest.raises(ValueError, match="both a default and a default_factory"):
        field(default=1, default_factory=list)


def _assignor_modules() -> list[str]:
    return [info.name for info in pkgutil.walk_packages(rackplan.assignor.__path__, "rackplan.assignor.")]


def test_no_assignor_module_imports_dataclasses_and_every_record_is_slotted() -> None:
    """The start-up gain holds only if no module on a path brings ``dataclasses`` (and ``inspect``) back."""
    root = Path(rackplan.assignor.__file__ or "").parent
    offenders = [
        str(p.relative_to(root))
        for p in sorted(root.rglob("*.py"))
        if "import dataclasses" in p.read_text(encoding="utf-8")
        or "from dataclasses" in p.read_text(encoding="utf-8")
    ]
    assert offenders == []
    records = 0
    for name in _assignor_modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == name and FIELDS in vars(value):
                records += 1
                annotated = [n for n, a in value.__annotations__.items() if not str(a).startswith("ClassVar")]
                assert list(getattr(value, FIELDS)) == annotated, name
                assert "__dict__" not in vars(value) and vars(value)["__slots__"] == getattr(value, FIELDS), (
                    name
                )
    assert records >= 25
