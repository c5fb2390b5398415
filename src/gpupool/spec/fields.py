"""A job spec's fields as data, and the one loop that runs each through its rule.

A form of the spec (what users write, what the HTTP API carries: model.py) is a tuple of
`Field`s; `check_fields` takes a mapping of raw values and gives back every field's final
value and every problem found, each named by its field: it never stops at the first.

Standard library only, on purpose. This is what pydantic did for the spec before (each field
a `BeforeValidator` running its rule from rules.py, and pydantic collecting the errors with
their locations); importing pydantic and building the two models cost ~100 ms, paid by every
`gpupool submit`. tests/unit/test_spec_fields.py checks, with hypothesis, that this loop
gives the values and the errors the pydantic models gave, for any input.

What a `Field` says, and how the loop reads it (the semantics pydantic had):
- a key left out gets `default` as it is, its rule not run (`required`: the error
  "is required" instead); a key given, even as None, is run through `rule`;
- `rule(value)` (or `rule(value, now)` when `reads_clock`) returns the value or raises a
  ValueError whose text is the message (rules.BadValue);
- `each`: the rule's result is a sequence, each element run through `each`; the field's
  value is the tuple of the results, and a bad element is "<field>: <label>[i]: message";
- `keys` / `values`: the rule's result is a mapping, each key and each value run through
  them; the value is the dict of the results, a bad entry "<field>.<key>: message" (its key's
  problem first, then its value's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Rule = Callable[[Any], Any]


class Field:
    """One key of a spec form (see the module docstring). A plain slotted class, not a
    dataclass: defining a dataclass costs about a millisecond, on every `gpupool submit`."""

    __slots__ = (
        "name",
        "rule",
        "default",
        "required",
        "reads_clock",
        "each",
        "label",
        "keys",
        "values",
    )

    def __init__(
        self,
        name: str,
        rule: Callable[..., Any],  # Rule, or (value, now) -> value when reads_clock
        default: object = None,
        *,
        required: bool = False,
        reads_clock: bool = False,
        each: Rule | None = None,
        label: str = "",
        keys: Rule | None = None,
        values: Rule | None = None,
    ) -> None:
        self.name = name
        self.rule = rule
        self.default = default
        self.required = required
        self.reads_clock = reads_clock
        self.each = each
        self.label = label
        self.keys = keys
        self.values = values


def names(fields: Sequence[Field]) -> tuple[str, ...]:
    return tuple(f.name for f in fields)


def check_fields(
    fields: Sequence[Field], data: Mapping[str, Any], now: float = 0.0
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """(values, errors): each field's value by name (meaningful only when there are no
    errors), and each problem as (field, message), in the order of `fields`. Keys of `data`
    that are not fields are ignored here (the caller names them, with a suggestion)."""
    values: dict[str, Any] = {}
    errors: list[tuple[str, str]] = []
    for f in fields:
        if f.name not in data:
            if f.required:
                errors.append((f.name, "is required"))
            values[f.name] = f.default
            continue
        try:
            value = f.rule(data[f.name], now) if f.reads_clock else f.rule(data[f.name])
        except ValueError as e:
            errors.append((f.name, str(e)))
            continue
        if f.each is not None:
            value = _each(f, f.each, value, errors)
        elif f.keys is not None and f.values is not None:
            value = _entries(f, f.keys, f.values, value, errors)
        values[f.name] = value
    return values, errors


def _each(
    f: Field, rule: Rule, items: Sequence[Any], errors: list[tuple[str, str]]
) -> tuple[Any, ...]:
    out = []
    for i, item in enumerate(items):
        try:
            out.append(rule(item))
        except ValueError as e:
            errors.append((f.name, f"{f.label}[{i}]: {e}"))
    return tuple(out)


def _entries(
    f: Field,
    key_rule: Rule,
    value_rule: Rule,
    entries: Mapping[Any, Any],
    errors: list[tuple[str, str]],
) -> dict[Any, Any]:
    out = {}
    for key, value in entries.items():
        where = f"{f.name}.{key}"
        good = True
        try:
            new_key = key_rule(key)
        except ValueError as e:
            errors.append((where, str(e)))
            good = False
        try:
            new_value = value_rule(value)
        except ValueError as e:
            errors.append((where, str(e)))
            good = False
        if good:
            out[new_key] = new_value
    return out
