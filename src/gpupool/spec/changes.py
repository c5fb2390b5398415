"""`gpupool update ID --time/--priority/--gpus`: what a change to a queued job asks for,
checked by the same rules as a submission's fields (spec/rules.py), every bad field named.

Standard library only. The wire form is a JSON object with any of `time` (a duration as
`--time` takes it: 2h, 30m, 1-12:00:00; a bare number is minutes), `priority` (a class name
or 0..1000) and `gpus` (a whole number, or a fraction of one GPU); values as the user typed
them (strings) or JSON numbers. What the daemon may do with them (pending or running, owner
or admin) is service/steering.py's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpupool.core.json_types import JsonObject
from gpupool.spec.errors import FieldError, SpecError
from gpupool.spec.rules import BadValue, check_gpus, check_priority, check_time

CHANGE_KEYS = ("time", "priority", "gpus")


@dataclass(frozen=True)
class JobChanges:
    """The fields to change; None: left as it is. `gpus` a whole number, or a fraction of
    one GPU (0 < x < 1)."""

    time_limit_s: float | None = None
    priority: int | None = None
    gpus: int | float | None = None

    @property
    def empty(self) -> bool:
        return self.time_limit_s is None and self.priority is None and self.gpus is None


def changes_to_wire(time: str | None, priority: str | None, gpus: str | None) -> JsonObject:
    """The request body from the CLI's flags, as typed (the daemon checks them)."""
    body: JsonObject = {}
    for key, value in (("time", time), ("priority", priority), ("gpus", gpus)):
        if value is not None:
            body[key] = value
    return body


def changes_from_wire(body: Mapping[str, Any]) -> JobChanges:
    """The changes `body` asks for; SpecError naming every bad field (an unknown one too,
    and none at all)."""
    errors: list[FieldError] = []
    for key in body:
        if key not in CHANGE_KEYS:
            errors.append(
                FieldError(str(key), f"cannot be changed (only {', '.join(CHANGE_KEYS)})")
            )
    time_limit = _checked(errors, "time", body.get("time"), _time)
    priority = _checked(errors, "priority", body.get("priority"), check_priority)
    gpus = _checked(errors, "gpus", body.get("gpus"), _gpus)
    if not errors and time_limit is None and priority is None and gpus is None:
        errors.append(FieldError("", "nothing to change: give --time, --priority or --gpus"))
    if errors:
        raise SpecError(errors)
    return JobChanges(time_limit, priority, gpus)


def _checked(errors: list[FieldError], key: str, value: Any, rule: Any) -> Any:
    if value is None:
        return None
    try:
        return rule(value)
    except ValueError as exc:
        errors.append(FieldError(key, str(exc)))
        return None


def _time(value: Any) -> float:
    seconds = check_time(_number_text(value))
    if seconds is None or seconds <= 0:
        raise BadValue(f"must be a positive duration such as 2h or 30m, got {value!r}")
    return seconds


def _gpus(value: Any) -> int | float:
    return check_gpus(_number_text(value))


def _number_text(value: Any) -> Any:
    """ "2" and "0.5" as the numbers they are (the CLI sends what was typed); other text
    as it is, for the rule to read or refuse."""
    if isinstance(value, str):
        for kind in (int, float):
            try:
                return kind(value.strip())
            except ValueError:
                continue
    return value
