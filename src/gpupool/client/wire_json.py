"""Reading the daemon's JSON with a checked shape: the shapes the server answers with
(core/wire_shapes.py), checked here, so a view reads a typed dict.

`conform(JobWire, value)` checks `value` against the shape: every required key there, each
value of its declared type, or `WireShapeError` naming where it is
("jobs[3].resources.gpus: expected a whole number, got 'two'"). Keys the shape does not know
are ignored, so a newer daemon may add fields; a key the shape marks `Added` may be absent
(an older daemon's answer: the view reads its default). A number is an int or a float and
is kept as it came (4 stays 4, never 4.0), so a view can be turned back into the same JSON.
A shape's checker is built once per process, from the shape's own annotations.
"""

from __future__ import annotations

from collections.abc import Callable

# What json.loads gives: the daemon's answers are parsed into this, then into the views.
from gpupool.core.json_types import JsonObject, JsonValue

__all__ = ["JsonObject", "JsonValue", "WireShapeError", "conform"]

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeVar

    from gpupool.core.wire_types import Kind

    S = TypeVar("S")

    Check = Callable[[JsonValue, str], object]  # checks a value at a place, or raises

    def _typed(shape: Callable[..., S], value: JsonValue) -> S:
        """`value`, checked, as the shape's type (a cast without importing typing)."""
        raise NotImplementedError
else:

    def _typed(shape, value):
        return value


NONE: frozenset[str] = frozenset()


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


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _check_none(value: JsonValue, where: str) -> None:
    if value is not None:
        raise WireShapeError(where, f"expected null, got {_kind(value)}")


def _check_bool(value: JsonValue, where: str) -> None:
    if not isinstance(value, bool):
        raise WireShapeError(where, f"expected true or false, got {_kind(value)}")


def _check_any(value: JsonValue, where: str) -> None:
    pass


_SCALAR_CHECKS: dict[str, Check] = {
    "int": as_whole,
    "float": as_number,
    "str": as_text,
    "bool": _check_bool,
    "null": _check_none,
    "any": _check_any,
}
_CHECKS: dict[tuple[int, frozenset[str]], Check] = {}


def _checker(kind: Kind) -> Check:
    """A function that checks a value against `kind` (core/wire_types.py), raising
    WireShapeError naming the place (the value's `where`) and what is wrong."""
    tag = kind[0]
    if tag in _SCALAR_CHECKS:
        return _SCALAR_CHECKS[str(tag)]
    if tag == "shape":
        return _shape_checker(kind[1], frozenset())
    if tag == "list":
        item = _checker(_kind_at(kind, 1))

        def check_list(value: JsonValue, where: str) -> None:
            for i, v in enumerate(as_list(value, where)):
                item(v, f"{where}[{i}]")

        return check_list
    if tag == "map":
        entry = _checker(_kind_at(kind, 1))

        def check_map(value: JsonValue, where: str) -> None:
            for k, v in as_object(value, where).items():
                entry(v, _at(where, k))

        return check_map
    options = [k for k in _kinds(kind[1]) if k[0] != "null"]
    nullable = len(options) < len(_kinds(kind[1]))
    if len(options) == 1:  # X | None: X's own words when it is neither
        inner = _checker(options[0])

        def check_optional(value: JsonValue, where: str) -> None:
            if value is not None or not nullable:
                inner(value, where)

        return check_optional
    checks = [_checker(k) for k in options]
    names = " or ".join(str(k[0]) for k in options) + (" or null" if nullable else "")

    def check_union(value: JsonValue, where: str) -> None:
        if value is None and nullable:
            return
        for check in checks:
            try:
                check(value, where)
                return
            except WireShapeError:
                continue
        raise WireShapeError(where, f"expected {names}, got {_kind(value)}")

    return check_union


def _kind_at(kind: Kind, index: int) -> Kind:
    inner = kind[index]
    assert isinstance(inner, tuple)
    return inner


def _kinds(value: object) -> list[Kind]:
    assert isinstance(value, tuple)
    return [k for k in value if isinstance(k, tuple)]


def _shape_checker(shape: object, shallow: frozenset[str]) -> Check:
    """The checker of a shape's objects (cached): each required key present, each present key
    of its kind; keys the shape does not know are left alone. `shallow` keys' values are only
    checked to be lists (their items are taken as they came)."""
    cache = (id(shape), shallow)
    found = _CHECKS.get(cache)
    if found is not None:
        return found
    # Here, not at the top: a command that reads no answer (logs) never loads the shapes.
    from gpupool.core.wire_types import REQUIRED, fields_of

    fields: list[tuple[str, Check, bool]] = []

    def check_shape(value: JsonValue, where: str) -> None:
        data = as_object(value, where or "the answer")
        for key, check, required in fields:
            try:
                v = data[key]
            except KeyError:
                if required:
                    raise WireShapeError(_at(where, key), "missing") from None
                continue
            check(v, _at(where, key))

    _CHECKS[cache] = check_shape  # before its fields: a shape may hold its own kind
    for key, kind, presence in fields_of(shape):
        check = as_list if key in shallow else _checker(kind)
        fields.append((key, check, presence == REQUIRED))
    return check_shape


# The quick check: whether a value is of a kind, without saying where it is not (no place is
# formatted for each value read). It decides only "yes"; on "no" the checker above runs and
# names the place (or finds the value good after all: it uses isinstance, this exact types).
Valid = Callable[[JsonValue], bool]
_EXACT: dict[str, tuple[type, ...]] = {
    "int": (int,),  # json.loads gives exactly these: bool is not an int here
    "float": (int, float),
    "str": (str,),
    "bool": (bool,),
    "null": (type(None),),
}
_VALID: dict[tuple[int, frozenset[str]], Valid] = {}


def _types(kind: Kind) -> frozenset[type] | None:
    """The exact types of a kind made of scalars only (`int`, `str | None`); None for any
    other."""
    tag = str(kind[0])
    if tag in _EXACT:
        return frozenset(_EXACT[tag])
    if tag != "union":
        return None
    found: set[type] = set()
    for option in _kinds(kind[1]):
        types = _types(option)
        if types is None:
            return None
        found |= types
    return frozenset(found)


def _all_of(types: frozenset[type]) -> Callable[[list[JsonValue]], bool]:
    def valid(values: list[JsonValue]) -> bool:
        return all(type(v) in types for v in values)

    return valid


def _valid(kind: Kind) -> Valid:
    """The quick check of `kind` (above)."""
    types = _types(kind)
    if types is not None:
        return lambda value: type(value) in types
    tag = kind[0]
    if tag == "any":
        return lambda value: True
    if tag == "shape":
        return _shape_valid(kind[1], NONE)
    if tag in ("list", "map"):
        inner = _kind_at(kind, 1)
        scalars = _types(inner)
        each = _all_of(scalars) if scalars is not None else None
        item = _valid(inner)
        container = list if tag == "list" else dict

        def valid_container(value: JsonValue) -> bool:
            if type(value) is not container:
                return False
            values = list(value.values()) if isinstance(value, dict) else value
            assert isinstance(values, list)
            return each(values) if each is not None else all(item(v) for v in values)

        return valid_container
    options = [_valid(k) for k in _kinds(kind[1])]
    return lambda value: any(valid(value) for valid in options)


def _shape_valid(shape: object, shallow: frozenset[str]) -> Valid:
    """The quick check of a shape's objects (cached), as `_shape_checker`'s."""
    cache = (id(shape), shallow)
    found = _VALID.get(cache)
    if found is not None:
        return found
    from gpupool.core.wire_types import REQUIRED, fields_of

    fields: list[tuple[str, bool, frozenset[type] | None, Valid]] = []

    def valid_shape(value: JsonValue) -> bool:
        if not isinstance(value, dict) or type(value) is not dict:
            return False
        for key, required, types, valid in fields:
            try:
                v = value[key]
            except KeyError:
                if required:
                    return False
                continue
            if types is not None:
                if type(v) not in types:
                    return False
            elif not valid(v):
                return False
        return True

    _VALID[cache] = valid_shape  # before its fields: a shape may hold its own kind
    for key, kind, presence in fields_of(shape):
        types = frozenset({list}) if key in shallow else _types(kind)
        fields.append((key, presence == REQUIRED, types, _valid(kind)))
    return valid_shape


def json_of(checked: object) -> JsonObject:
    """A checked answer (a shape's typed dict) as the JSON object it came as: a view's
    `wire`, printed by `--json` as it came."""
    assert isinstance(checked, dict)
    return checked


def conform(
    shape: Callable[..., S], value: JsonValue, where: str = "", shallow: frozenset[str] = NONE
) -> S:
    """`value` checked against `shape` (one of core/wire_shapes.py's) and returned as it is,
    typed as the shape; WireShapeError naming where it differs. `where`: the value's place in
    the answer ("" for the whole answer); `shallow`: keys whose lists are not looked into."""
    if not _shape_valid(shape, shallow)(value):
        _shape_checker(shape, shallow)(value, where)  # names the place, or finds it good
    return _typed(shape, value)
