"""How a job's runs relate to other runs: retries of a failed attempt, dependencies on other
jobs (`--after`), and array tasks (`--array`). Plain data the spec layer builds and the
engine acts on; stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gpupool.core.job import JobState

MAX_RETRIES = 100
MAX_ARRAY_TASKS = 10_000
MAX_ARRAY_INDEX = 1_000_000
MAX_DEPENDENCIES = 64


class AfterKind(StrEnum):
    """What a dependency must end as for its dependent to start (Slurm's afterok/afterany)."""

    OK = "ok"  # SUCCEEDED; anything else can never be met: the dependent is cancelled
    ANY = "any"  # ended in any way


@dataclass(frozen=True, order=True)
class Dependency:
    job_id: int
    kind: AfterKind = AfterKind.OK

    def met_by(self, ended: JobState) -> bool:
        """Whether the dependency ending as `ended` (a terminal state) lets the job start."""
        return self.kind is AfterKind.ANY or ended is JobState.SUCCEEDED

    def __str__(self) -> str:
        return f"{self.job_id}:{self.kind.value}"


@dataclass(frozen=True)
class ArrayRequest:
    """`--array 0-99%8` as submitted: the task indices, and at most `limit` running at once
    (None: no limit). The daemon stores one job per index (`ArrayTask`), never this."""

    indices: tuple[int, ...]
    limit: int | None = None

    def __str__(self) -> str:
        return format_indices(self.indices) + ("" if self.limit is None else f"%{self.limit}")


@dataclass(frozen=True)
class ArrayTask:
    """One task of an array: its index (`GPUPOOL_ARRAY_INDEX`) and the array's throttle.
    The array's id is the store's (`Job.array_id`: the first task's job id)."""

    index: int
    limit: int | None = None


def retry_wanted(retries: int, retry_on_exit: tuple[int, ...], attempt: int, code: int) -> bool:
    """Whether attempt `attempt` (0 = the first run) that exited with `code` (non-zero) is
    run again: fewer than `retries` retries were made, and the code is one of
    `retry_on_exit` (empty: any non-zero code)."""
    if code == 0 or attempt >= retries:
        return False
    return not retry_on_exit or code in retry_on_exit


def format_indices(indices: tuple[int, ...] | list[int]) -> str:
    """Sorted indices as ranges, Slurm's way: (1, 3, 5, 6, 7) -> "1,3,5-7"."""
    parts: list[str] = []
    values = sorted(set(indices))
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(parts)
