"""Small read-only value classes without `dataclasses`, for modules the CLI imports on every
`gpupool submit` or `queue`: the first frozen dataclass a process defines costs it
`dataclasses` and the `inspect` it imports (~9 ms on the development machine), and each one
about a millisecond more to create. A subclass lists its fields in `__slots__`, takes them in
that order in `__init__` and sets them there with `object.__setattr__`; it then compares,
hashes, prints, copies and pickles as a frozen dataclass of the same fields would. Standard library only, and nothing imported.
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
