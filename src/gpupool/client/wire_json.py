"""Reading the daemon's JSON with a checked shape: one place that says what a value must be.

`Fields` wraps one JSON object and reads each field as the type it must have; a field that
is missing or of another type raises `WireShapeError` naming where it is
("jobs[3].resources.gpus: expected a number, got 'two'"). Fields the client does not know
are ignored, so a newer daemon may add fields. A number is an int or a float and is kept as
it came (4 stays 4, never 4.0), so a view can be turned back into the same JSON.
"""

from __future__ import annotations

# What json.loads gives: the daemon's answers are parsed into this, then into the views.
from gpupool.core.json_types import JsonObject, JsonValue

__all__ = ["JsonObject", "JsonValue", "WireShapeError"]


class WireShapeError(ValueError):
    """The daemon answered a shape this client does not know: `where` names the value
    (a path such as "jobs[3].state"), `problem` what is wrong with it."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


def _kind(value: JsonValue) -> str:
    if isinstance(value, str):
        return repr(value[:40])
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    return "a list" if isinstance(value, list) else "an object"


def as_object(value: JsonValue, where: str) -> JsonObject:
    if not isinstance(value, dict):
        raise WireShapeError(where, f"expected an object, got {_kind(value)}")
    return value


def as_list(value: JsonValue, where: str) -> list[JsonValue]:
    if not isinstance(value, list):
        raise WireShapeError(where, f"expected a list, got {_kind(value)}")
    return value


def as_text(value: JsonValue, where: str) -> str:
    if not isinstance(value, str):
        raise WireShapeError(where, f"expected a string, got {_kind(value)}")
    return value


def as_whole(value: JsonValue, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireShapeError(where, f"expected a whole number, got {_kind(value)}")
    return value


def as_number(value: JsonValue, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise WireShapeError(where, f"expected a number, got {_kind(value)}")
    return value


class Fields:
    """One JSON object at `where` ("" for the whole answer), read field by field."""

    __slots__ = ("data", "where")

    def __init__(self, value: JsonValue, where: str = "") -> None:
        self.data = as_object(value, where or "the answer")
        self.where = where

    def at(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def raw(self, key: str) -> JsonValue:
        try:
            return self.data[key]
        except KeyError:
            raise WireShapeError(self.at(key), "missing") from None

    def text(self, key: str) -> str:
        return as_text(self.raw(key), self.at(key))

    def opt_text(self, key: str) -> str | None:
        value = self.raw(key)
        return None if value is None else as_text(value, self.at(key))

    def whole(self, key: str) -> int:
        return as_whole(self.raw(key), self.at(key))

    def opt_whole(self, key: str) -> int | None:
        value = self.raw(key)
        return None if value is None else as_whole(value, self.at(key))

    def number(self, key: str) -> float:
        return as_number(self.raw(key), self.at(key))

    def opt_number(self, key: str) -> float | None:
        value = self.raw(key)
        return None if value is None else as_number(value, self.at(key))

    def flag(self, key: str) -> bool:
        value = self.raw(key)
        if not isinstance(value, bool):
            raise WireShapeError(self.at(key), f"expected true or false, got {_kind(value)}")
        return value

    def obj(self, key: str) -> Fields:
        return Fields(self.raw(key), self.at(key))

    def opt_obj(self, key: str) -> Fields | None:
        value = self.raw(key)
        return None if value is None else Fields(value, self.at(key))

    def items(
        self, key: str, default: list[JsonValue] | None = None
    ) -> list[tuple[str, JsonValue]]:
        """The list at `key` as (where, item) pairs; `default` when the key is absent."""
        if default is not None and key not in self.data:
            values = default
        else:
            values = as_list(self.raw(key), self.at(key))
        return [(f"{self.at(key)}[{i}]", v) for i, v in enumerate(values)]

    def texts(self, key: str) -> tuple[str, ...]:
        return tuple(as_text(v, where) for where, v in self.items(key))

    def wholes(self, key: str) -> tuple[int, ...]:
        return tuple(as_whole(v, where) for where, v in self.items(key))

    def text_map(self, key: str) -> dict[str, str]:
        inner = Fields(self.raw(key), self.at(key))
        return {k: as_text(v, inner.at(k)) for k, v in inner.data.items()}

    def whole_map(self, key: str) -> dict[str, int]:
        inner = Fields(self.raw(key), self.at(key))
        return {k: as_whole(v, inner.at(k)) for k, v in inner.data.items()}
