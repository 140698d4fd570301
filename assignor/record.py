"""Slotted records (frozen or not) for the assignors, without the ``dataclasses`` module.

Why not ``dataclasses``: importing it imports ``inspect`` (and with it ``ast``, ``dis``,
``tokenize``, ``linecache``), and ``@dataclass(slots=True)`` compiles each generated method
separately and builds every class twice; on a small instance ``rackplan assign`` is all
start-up, and that was about a fifth of its CPU above the bare interpreter (issue 29,
docs/performance.md, "`rackplan assign` start-up").  :func:`record` does what the
assignors used of it, the same way: ``__slots__``, an ``__init__`` taking the fields in
order (defaults, ``field(default_factory=...)``, ``field(init=False)`` and
``__post_init__``), ``__repr__``, ``__eq__`` over the fields for the same class, and for a
frozen record ``__hash__``, pickling, and assignment refused with
:class:`FrozenInstanceError`; each generated method is compiled when first called (:class:`_Deferred`).
``typing.dataclass_transform`` tells type checkers it is a dataclass, so mypy checks
constructors, fields and frozenness as before; at run time it is a no-op here, so ``typing`` is not
imported (about 5 ms of every start, issue 29).  ``tests/assignor/test_record.py`` checks
each behaviour against ``dataclasses`` itself on the same classes.
"""

from __future__ import annotations

from collections.abc import Callable

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (issue 29)

if TYPE_CHECKING:
    from typing import Any, TypeVar, dataclass_transform

    T = TypeVar("T")
else:

    def dataclass_transform(**_: object) -> Callable[[Callable[..., object]], Callable[..., object]]:
        """typing's marker for type checkers, which changes nothing a program reads."""
        return lambda f: f


#: the attribute listing a record's fields, in order (``dataclasses.fields``' counterpart)
FIELDS = "__record_fields__"


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a frozen record (``dataclasses.FrozenInstanceError``'s counterpart)."""


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


_MISSING: Any = _Missing()


class Field:
    """A field's specification: what :func:`field` returns, read once by :func:`record`."""

    __slots__ = ("default", "default_factory", "init")

    def __init__(self, default: object, default_factory: Callable[[], object] | None, init: bool) -> None:
        self.default = default
        self.default_factory = default_factory
        self.init = init


def field(
    *, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None, init: bool = True
) -> Any:
    """A field with a default, a default factory, or left out of ``__init__`` (set by ``__post_init__``)."""
    if default is not _MISSING and default_factory is not None:
        raise ValueError("a field cannot have both a default and a default_factory")
    return Field(default, default_factory, init)


def _frozen_setattr(self: object, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: object, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _field_names(cls: type) -> list[str]:
    """The annotated names of the class body, in order, less ``ClassVar`` ones (annotations are strings)."""
    names = []
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063 (no inspect)
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        if not (text.startswith("ClassVar") or text.startswith("typing.ClassVar")):
            names.append(name)
    return names


def _methods(cls: type, names: list[str], specs: dict[str, Field], frozen: bool) -> dict[str, _Deferred]:
    """``__init__``, ``__repr__``, ``__eq__`` (and ``__hash__``), each as its source text, compiled when first called."""
    setter = "_set(self, {0!r}, {1})" if frozen else "self.{0} = {1}"
    params, body, env = [], [], {"_set": object.__setattr__, "_MISSING": _MISSING}
    for name in names:
        spec = specs.get(name)
        if spec is None:
            params.append(name)
            body.append(setter.format(name, name))
        elif not spec.init:
            if spec.default_factory is not None:
                env[f"_f_{name}"] = spec.default_factory
                body.append(setter.format(name, f"_f_{name}()"))
            elif spec.default is not _MISSING:
                env[f"_d_{name}"] = spec.default
                body.append(setter.format(name, f"_d_{name}"))
        elif spec.default_factory is not None:
            env[f"_f_{name}"] = spec.default_factory
            params.append(f"{name}=_MISSING")
            body.append(setter.format(name, f"_f_{name}() if {name} is _MISSING else {name}"))
        else:
            env[f"_d_{name}"] = spec.default
            params.append(f"{name}=_d_{name}")
            body.append(setter.format(name, name))
    defaults_seen = False
    for p in params:
        if "=" in p:
            defaults_seen = True
        elif defaults_seen:
            raise TypeError(f"{cls.__name__}: non-default field {p!r} follows a default field")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    fields_tuple = "(" + "".join(f"self.{n}, " for n in names) + ")"
    other_tuple = "(" + "".join(f"other.{n}, " for n in names) + ")"
    shown = ", ".join(f"{n}={{self.{n}!r}}" for n in names)
    sources = {
        "__init__": [
            f"def __init__(self, {', '.join(params)}):",
            *(f"    {line}" for line in body or ["pass"]),
        ],
        "__repr__": ["def __repr__(self):", f"    return f'{{type(self).__qualname__}}({shown})'"],
        "__eq__": [
            "def __eq__(self, other):",
            "    if other.__class__ is not self.__class__:",
            "        return NotImplemented",
            f"    return {fields_tuple} == {other_tuple}",
        ],
    }
    if frozen:
        sources["__hash__"] = ["def __hash__(self):", f"    return hash({fields_tuple})"]
    return {
        name: _Deferred(name, "\n".join(lines), env, f"{cls.__qualname__}.{name}")
        for name, lines in sources.items()
    }


class _Deferred:
    """One generated method, compiled (``exec``) the first time it is called, then put on the class in its place.

    Compiling is most of what a record costs at import: about 0.1 to 0.2 ms per method, and
    ``rackplan assign`` defines 8 to 22 records, most of whose ``__repr__``, ``__eq__`` and ``__hash__``
    (and some whose ``__init__``) a run never calls (issue 29: start-up).  The method compiled is
    the one the source says, so a record behaves the same before and after.
    """

    __slots__ = ("env", "name", "owner", "qualname", "source")

    def __init__(self, name: str, source: str, env: dict[str, Any], qualname: str) -> None:
        self.name, self.source, self.env, self.qualname = name, source, env, qualname
        self.owner: type | None = None

    def compiled(self) -> Callable[..., Any]:
        """The method, compiled, and set on the record class (later calls go to it directly)."""
        env = dict(self.env)
        exec(self.source, env)
        fn: Callable[..., Any] = env[self.name]
        fn.__qualname__ = self.qualname
        if self.owner is not None:
            setattr(self.owner, self.name, fn)
        return fn

    def stub(self) -> Callable[..., Any]:
        """What the class holds until the first call."""

        def method(instance: object, *args: Any, **kwargs: Any) -> Any:
            return self.compiled()(instance, *args, **kwargs)

        method.__name__ = self.name
        method.__qualname__ = self.qualname
        return method


def _getstate(self: object) -> tuple[object, ...]:
    return tuple(getattr(self, n) for n in getattr(type(self), FIELDS))


def _setstate(self: object, state: tuple[object, ...]) -> None:
    for name, value in zip(getattr(type(self), FIELDS), state, strict=True):
        object.__setattr__(self, name, value)


@dataclass_transform(field_specifiers=(field,))
def record(*, frozen: bool = False) -> Callable[[type[T]], type[T]]:
    """The class as a slotted record: ``@record(frozen=True)`` for a value, ``@record()`` for a state."""

    def make(cls: type[T]) -> type[T]:
        names = _field_names(cls)
        body = dict(cls.__dict__)
        specs = {}
        for name in names:
            value = body.pop(name, _MISSING)
            if isinstance(value, Field):
                specs[name] = value
            elif value is not _MISSING:
                specs[name] = Field(value, None, True)
        for name in ("__dict__", "__weakref__"):
            body.pop(name, None)
        body["__slots__"] = tuple(names)
        body[FIELDS] = tuple(names)
        body["__match_args__"] = tuple(n for n in names if specs.get(n) is None or specs[n].init)
        methods = _methods(cls, names, specs, frozen)
        body.update({name: m.stub() for name, m in methods.items()})
        if not frozen:
            body["__hash__"] = None  # mutable: unhashable, as a dataclass with eq
        if frozen:
            body.update(
                __setattr__=_frozen_setattr,
                __delattr__=_frozen_delattr,
                __getstate__=_getstate,
                __setstate__=_setstate,
            )
        metaclass: type = type(cls)
        made: type[T] = metaclass(cls.__name__, cls.__bases__, body)
        made.__qualname__ = cls.__qualname__
        for m in methods.values():
            m.owner = made
        return made

    return make


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of the record with ``changes`` (``dataclasses.replace``' counterpart: ``__post_init__`` runs again,
    a field left out of ``__init__`` cannot be given: ValueError; an unknown name: TypeError)."""
    cls = type(obj)
    init: tuple[str, ...] = vars(cls)["__match_args__"]
    computed = set(changes) & (set(getattr(cls, FIELDS)) - set(init))
    if computed:
        raise ValueError(
            f"{cls.__name__}: fields {sorted(computed)} are set by __post_init__, not by replace()"
        )
    return cls(**{n: getattr(obj, n) for n in init} | changes)
