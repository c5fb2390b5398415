"""Runs' ends, noted where they are written and handed over once written, so that fair-share
usage is kept from what changed instead of re-read from the whole history (issue 35, goal 8:
engine/usage_cache.py re-read every run of 70 days every 10 s; 1.2 s and 62 MB a refresh at
100,000 runs, docs/benchmarks.md).

Contract: every write that ends a run notes it in its session (`note_run_end`); the store
hands the notes of a write to its `RunEnds` after that write commits (`Store._write`), and
drops them when it rolls back or is retried. So each run ended is handed over once, in
commit order, whatever the date of its end (`finish` may be given an end hours old).

A run is counted as the full read counts it (`Store.usage_history`), by two rules:
- a job's last run, ended by `finish` (or a cancel of a job that kept a run): its row's
  `start_time` to its end, its GPUs by the row (`run_gpus`: a shared GPU's fraction);
- a run ended by `requeue`: `start_time` to the requeue, its GPUs by its request
  (`store/accounting.py` `requeued_runs`: a shared GPU's memory is not known once it left).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

from sqlalchemy.orm import Session

from gpupool.core.job import Resources, gpu_count
from gpupool.store.codec import decode_spec

_NOTES = "gpupool_run_ends"  # the key of a session's notes in `Session.info`


class RunEnd(NamedTuple):
    """One run that ended, with its GPUs counted (`RunEnds.take`)."""

    project: str
    user: str
    gpus: float
    start: float
    end: float


class _Noted(NamedTuple):
    """A run's end as a write noted it, its GPUs not counted yet (that needs the GPUs'
    memory, which the store does not know)."""

    project: str
    user: str
    held: tuple[int, ...]
    node: str | None
    granted: int | None
    spec: dict[str, Any] | None
    start: float
    end: float
    by_request: bool


def run_gpus(
    held: list[int] | tuple[int, ...],
    node: str | None,
    granted: int | None,
    spec: dict[str, Any] | None,
    memory: Mapping[tuple[str, int], int],
) -> float:
    """A job's last run's GPUs as fair share counts them (`Store.usage_history`'s rule):
    the GPUs held; a share of one GPU by its spec and the memory of the GPU it shared."""
    if granted is None:
        return float(len(held))
    res = (
        decode_spec(spec).resources
        if spec is not None
        else Resources(gpus=1, gpu_memory_bytes=granted)
    )
    total = memory.get((node, held[0])) if node is not None and held else None
    return gpu_count(res, len(held), granted, total)


class RunColumns(Protocol):
    """The columns of a job's row that say its run: a `JobRow`, or a row a Core select of
    them read (store/bulk_cancel.py)."""

    @property
    def project(self) -> str: ...
    @property
    def user(self) -> str: ...
    @property
    def gpus(self) -> list[int] | None: ...
    @property
    def node(self) -> str | None: ...
    @property
    def gpu_memory_bytes(self) -> int | None: ...
    @property
    def spec(self) -> dict[str, Any]: ...
    @property
    def start_time(self) -> float | None: ...


def note_run_end(s: Session, row: RunColumns, end: float, *, by_request: bool = False) -> None:
    """Note in `s` that the run of `row` (if it has a `start_time`) ends at `end`;
    `by_request`: it was requeued (its GPUs by its request). Call before the row's run
    columns are cleared."""
    if row.start_time is None:
        return
    noted = _Noted(
        row.project,
        row.user,
        tuple(row.gpus or ()),
        row.node,
        row.gpu_memory_bytes,
        row.spec if (by_request or row.gpu_memory_bytes is not None) else None,
        row.start_time,
        end,
        by_request,
    )
    s.info.setdefault(_NOTES, []).append(noted)


def hand_over(s: Session, to: RunEnds | None) -> None:
    """After `s` committed: its notes to `to` (None: nobody keeps them)."""
    notes = s.info.pop(_NOTES, None)
    if notes and to is not None:
        to.add(notes)


class RunEnds:
    """The runs ended since the last `take`, kept for one reader (the engine's usage
    ledger) from when it asked (`Store.keep_run_ends`). Thread-safe: writers of any
    thread hand over, the reader takes."""

    def __init__(self, gpu_memory: Mapping[tuple[str, int], int]) -> None:
        self._memory = dict(gpu_memory)
        self._lock = threading.Lock()
        self._noted: list[_Noted] = []

    def add(self, notes: list[_Noted]) -> None:
        with self._lock:
            self._noted.extend(notes)

    def take(self) -> list[RunEnd]:
        with self._lock:
            noted, self._noted = self._noted, []
        return [self._counted(n) for n in noted]

    def _counted(self, n: _Noted) -> RunEnd:
        if n.by_request and n.spec is not None:  # always: a requeue notes its spec
            gpus = gpu_count(decode_spec(n.spec).resources)
        else:
            gpus = run_gpus(n.held, n.node, n.granted, n.spec, self._memory)
        return RunEnd(n.project, n.user, gpus, n.start, n.end)
