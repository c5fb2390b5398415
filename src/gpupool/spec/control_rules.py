"""The rules of the fields about a job's runs (core/job_control.py): retries (`retry`,
`retry_on_exit`), dependencies (`after`) and arrays (`array`). As rules.py's: plain
functions that return the final value or raise BadValue saying what is wrong; standard
library only. core.job_control is imported by each rule when a spec has its key (its frozen
dataclasses cost a plain `gpupool submit -- CMD` about a millisecond each).
"""

from __future__ import annotations

import re

from gpupool.spec.rules import BadValue, count_of, got, number_of

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from gpupool.core.job_control import ArrayRequest, Dependency


def check_retries(value: Any) -> int:
    if value is None:
        return 0
    from gpupool.core.job_control import MAX_RETRIES

    return count_of(value, "retries", 0, MAX_RETRIES)


def _int_items(value: Any, what: str) -> list[Any]:
    """A list from a comma-separated text ("33,137"), a list, or one number."""
    if isinstance(value, str):
        items: list[Any] = [v.strip() for v in value.split(",")]
        if any(not v for v in items):
            raise BadValue(f"must be a comma-separated list of {what}, got {got(value)}")
        return items
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    raise BadValue(f"must be a comma-separated list of {what}, got {got(value)}")


def check_retry_on_exit(value: Any) -> tuple[int, ...]:
    """Exit codes that are retried ("33,137"); () means any non-zero code."""
    if value is None:
        return ()
    codes: set[int] = set()
    for item in _int_items(value, "exit codes"):
        n = number_of(item)
        if not isinstance(n, int) or not 1 <= n <= 255:
            raise BadValue(f"exit codes must be whole numbers from 1 to 255, got {got(item)}")
        codes.add(n)
    return tuple(sorted(codes))


def check_after(value: Any) -> tuple[Dependency, ...]:
    """`ID[:ok|:any]`, several comma-separated (or a list): the jobs to wait for."""
    if value is None:
        return ()
    from gpupool.core.job_control import MAX_DEPENDENCIES, AfterKind, Dependency

    deps: dict[int, Dependency] = {}
    for item in _int_items(value, "job ids (ID, ID:ok or ID:any)"):
        text = str(item) if isinstance(item, int) and not isinstance(item, bool) else item
        if not isinstance(text, str):
            raise BadValue(f"must be ID, ID:ok or ID:any, got {got(item)}")
        ident, _, kind = text.strip().partition(":")
        n = number_of(ident)
        if not isinstance(n, int) or not 1 <= n < 2**63:
            raise BadValue(f"must be a job id (ID, ID:ok or ID:any), got {got(item)}")
        try:
            after = AfterKind(kind.strip().lower() or "ok")
        except ValueError:
            raise BadValue(f"{got(text)}: the condition must be ok or any") from None
        deps[n] = Dependency(n, after)
    if len(deps) > MAX_DEPENDENCIES:
        raise BadValue(f"must name at most {MAX_DEPENDENCIES} jobs, got {len(deps)}")
    return tuple(sorted(deps.values()))


_ARRAY_PART = re.compile(r"(\d+)(?:-(\d+)(?::(\d+))?)?")


def check_array(value: Any) -> ArrayRequest | None:
    """Slurm's --array: `0-99`, `1,3,5-7`, `0-15:4` (a step), `%K` at the end (at most K
    tasks running at once)."""
    if value is None:
        return None
    from gpupool.core.job_control import MAX_ARRAY_INDEX, MAX_ARRAY_TASKS, ArrayRequest

    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise BadValue(f"must be indices such as 0-99, 1,3,5-7 or 0-99%8, got {got(value)}")
    text, _, throttle = value.strip().partition("%")
    limit: int | None = None
    if throttle:
        n = number_of(throttle)
        if not isinstance(n, int) or n < 1:
            raise BadValue(f"%K must be a whole number of tasks >= 1, got {got(value)}")
        limit = n
    indices: set[int] = set()
    for part in text.split(","):
        m = _ARRAY_PART.fullmatch(part.strip())
        if m is None:
            raise BadValue(f"must be indices such as 0-99, 1,3,5-7 or 0-99%8, got {got(value)}")
        first = int(m.group(1))
        last = first if m.group(2) is None else int(m.group(2))
        step = 1 if m.group(3) is None else int(m.group(3))
        if last < first:
            raise BadValue(f"range {part.strip()!r} ends before it starts, in {got(value)}")
        if step < 1:
            raise BadValue(f"step must be 1 or more, in {got(value)}")
        if last > MAX_ARRAY_INDEX:
            raise BadValue(f"indices must be at most {MAX_ARRAY_INDEX}, got {got(value)}")
        if (last - first) // step + 1 + len(indices) > MAX_ARRAY_TASKS:
            raise BadValue(f"must have at most {MAX_ARRAY_TASKS} tasks, got {got(value)}")
        indices.update(range(first, last + 1, step))
    return ArrayRequest(tuple(sorted(indices)), limit)
