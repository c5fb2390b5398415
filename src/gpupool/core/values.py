"""Small read-only value classes without `dataclasses`, for modules the CLI imports on every
`gpupool submit` or `queue`: the first frozen dataclass a process defines costs it
`dataclasses` and the `inspect` it imports (~9 ms on the development machine), and each one
about a millisecond more to create. Standard library only, and nothing imported. Two forms:

- `FrozenValue`, for a class with an `__init__` of its own (one that checks or derives): a
  subclass lists its fields in `__slots__`, takes them in that order in `__init__` and sets
  them there with `object.__setattr__`; it then compares, hashes, prints, copies and pickles
  as a frozen dataclass of the same fields would.
- `@record`, for a plain record of annotated fields (the client's views: issue 35, goal 6):
  it makes what `@dataclass(frozen=True, slots=True)` made, `__slots__`, an `__init__` by
  position or name with the defaults, `__repr__`, `__eq__` and `__hash__` over the fields
  (except those given `unlisted()`: a required field left out of all three, a view's
  `wire`), no assignment after `__init__`, pickling; `__init__` from generated source, one `exec` per
  class on its first use, as dataclasses does without its machinery. mypy reads it as a frozen dataclass
  (PEP 681's dataclass_transform). `replaced` is its `dataclasses.replace`.
"""

from __future__ import annotations


class FrozenValue:
    """Equal when of the same class with equal fields (`__slots__`, in order); read-only."""

    __slots__: tuple[str, ...] = ()

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, FrozenValue)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __reduce__(self) -> tuple[type[FrozenValue], tuple[object, ...]]:
        # copy and pickle re-create it through __init__ (its fields, in __slots__ order):
        # their default way sets the slots one by one, which __setattr__ refuses.
        return type(self), self._values()

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"


# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar, dataclass_transform

    C = TypeVar("C", bound=type)
    R = TypeVar("R")
else:

    def dataclass_transform(**_: object) -> object:
        return lambda f: f


class _Unlisted:
    __slots__ = ()

    def __repr__(self) -> str:
        return "unlisted()"


_UNLISTED = _Unlisted()


def unlisted() -> Any:
    """A required field left out of the record's repr, eq and hash."""
    return _UNLISTED


@dataclass_transform(frozen_default=True, field_specifiers=(unlisted,))
def record(cls: C) -> C:
    """`cls` as a frozen, slotted record of its annotated fields (module docstring)."""
    names = list(cls.__dict__.get("__annotations__", {}))
    defaults: dict[str, object] = {}
    listed: list[str] = []
    for name in names:
        value = cls.__dict__.get(name, _UNLISTED)
        required = name not in cls.__dict__ or value is _UNLISTED
        if required and defaults:
            raise TypeError(f"{cls.__name__}: field {name} without a default after one with")
        if not required:
            defaults[name] = value
        if name not in cls.__dict__ or value is not _UNLISTED:
            listed.append(name)
    skip = {*names, "__dict__", "__weakref__"}
    namespace = {k: v for k, v in cls.__dict__.items() if k not in skip}
    namespace["__slots__"] = tuple(names)
    made = type(cls)(cls.__name__, cls.__bases__, namespace)
    for name, method in _methods(made, names, defaults, listed).items():
        method.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(made, name, method)
    return made


def _methods(
    made: type, names: list[str], defaults: dict[str, object], listed: list[str]
) -> dict[str, Any]:
    qualname = made.__qualname__
    fields = _fields_of(listed)

    def __init__(self: object, *args: object, **kwargs: object) -> None:
        # The first record made of a class compiles its __init__ (generated source, as
        # dataclasses does: one call per field set, by name) and puts it in this one's
        # place; a class never made costs no compile. A view module has ~10 records and a
        # command makes one or two: compiling all of them on import was ~1.5 ms of it.
        init = _compiled_init(names, defaults)
        init.__qualname__ = f"{qualname}.__init__"
        made.__init__ = init  # type: ignore[misc]
        init(self, *args, **kwargs)

    def __repr__(self: object) -> str:
        shown = ", ".join(f"{n}={v!r}" for n, v in zip(listed, fields(self), strict=True))
        return f"{qualname}({shown})"

    def __eq__(self: object, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return fields(self) == fields(other)

    def __hash__(self: object) -> int:
        return hash(fields(self))

    return {
        "__init__": __init__,
        "__repr__": __repr__,
        "__eq__": __eq__,
        "__hash__": __hash__,
        "__setattr__": _frozen_set,
        "__delattr__": _frozen_delete,
        "__getstate__": _state,
        "__setstate__": _set_state,
    }


def _compiled_init(names: list[str], defaults: dict[str, object]) -> Callable[..., None]:
    """An __init__ by position or name, with the defaults, setting each field."""
    params = ", ".join(f"{n}=_default_{n}" if n in defaults else n for n in names)
    sets = "".join(f"    _set(self, {n!r}, {n})\n" for n in names) or "    pass\n"
    scope: dict[str, object] = {f"_default_{n}": v for n, v in defaults.items()}
    scope["_set"] = object.__setattr__
    exec(f"def __init__(self, {params}):\n{sets}", scope)  # our own source, from field names
    init: Callable[..., None] = scope["__init__"]  # type: ignore[assignment]
    return init


def _fields_of(listed: list[str]) -> Callable[[object], tuple[object, ...]]:
    """The listed fields' values of a record, as a tuple (for none or one field too)."""
    names = tuple(listed)

    def fields(obj: object) -> tuple[object, ...]:
        return tuple([getattr(obj, n) for n in names])

    return fields


def _frozen_set(self: object, name: str, value: object) -> None:
    raise AttributeError(f"cannot assign to field {name!r}")


def _frozen_delete(self: object, name: str) -> None:
    raise AttributeError(f"cannot delete field {name!r}")


def _state(self: object) -> list[object]:
    return [getattr(self, n) for n in type(self).__slots__]  # type: ignore[attr-defined]


def _set_state(self: object, state: list[object]) -> None:
    for name, value in zip(type(self).__slots__, state, strict=True):  # type: ignore[attr-defined]
        object.__setattr__(self, name, value)


def replaced(obj: R, **changes: object) -> R:
    """`obj` with the fields named changed (a record's `dataclasses.replace`); TypeError for
    a name that is not one of its fields."""
    names = type(obj).__slots__  # type: ignore[attr-defined]
    unknown = changes.keys() - set(names)
    if unknown:
        raise TypeError(f"{type(obj).__name__} has no field {', '.join(sorted(unknown))}")
    return type(obj)(**{n: changes[n] if n in changes else getattr(obj, n) for n in names})
