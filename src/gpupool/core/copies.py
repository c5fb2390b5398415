"""`copy_with`: a dataclass (frozen or not) with some fields changed, as
`dataclasses.replace` makes it, at a sixth of the cost, for the engine's per-job copies of a
long queue.

`dataclasses.replace` calls the class's `__init__`, which for a frozen class sets each of
Job's and JobSpec's ~20-30 fields through `object.__setattr__` (~13 us for the two copies
the engine's view makes of each stored job; ~2 us here). The copy here takes the instance's
`__dict__` instead, which is the same object exactly when `__init__` only stores its
arguments: no `__post_init__`, no field left out of `__init__`, no `__slots__`. Classes that
are not so are refused (TypeError, once per class), as is a change naming no field.
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

T = TypeVar("T")

_FIELDS: dict[type, frozenset[str]] = {}  # classes checked, and their field names


def copy_with(obj: T, **changes: object) -> T:
    """`dataclasses.replace(obj, **changes)` for a plain dataclass (module doc)."""
    cls = type(obj)
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = _plain_fields(cls)
    if not changes.keys() <= names:
        unknown = ", ".join(sorted(changes.keys() - names))
        raise TypeError(f"{cls.__name__} has no field {unknown}")
    new = object.__new__(cls)
    state = new.__dict__
    state.update(obj.__dict__)
    state.update(changes)
    return new


def _plain_fields(cls: type) -> frozenset[str]:
    """The field names of `cls`, or TypeError when a copy of its `__dict__` is not what
    its `__init__` would make."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a dataclass")
    fields = dataclasses.fields(cls)
    if (
        hasattr(cls, "__post_init__")
        or "__slots__" in cls.__dict__
        or any(not f.init for f in fields)
    ):
        raise TypeError(f"{cls.__name__}: copy_with takes plain dataclasses only; use replace")
    return frozenset(f.name for f in fields)
