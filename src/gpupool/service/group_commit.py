"""Group commit: writes that arrive while one is being made are made together, in one
transaction, so a burst of submissions syncs the disk once per batch instead of once each.

Every submission is durable before it is acknowledged (docs/ARCHITECTURE.md, "A job's
life"), and on SQLite with synchronous=FULL each commit waits for the disk (a few
milliseconds here): one at a time, 100 clients submitting at once queue behind 100 syncs.
So one writer thread writes whatever waits, all at once, and each item's future resolves
when its transaction has committed (as PostgreSQL's group commit and SQLite's own batching
of a transaction do). A lone item is written at once: no added delay but the hand-over.

A writer thread rather than a caller leading the batch: the API's event loop awaits the
future (`submit`) instead of parking a worker thread per submission, which under 100
clients cost the interpreter more than the writes (docs/benchmarks.md, bench/load.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class GroupCommit(Generic[T, R]):
    def __init__(
        self, write_many: Callable[[Sequence[T]], Sequence[R]], name: str = "gpupool-commit"
    ) -> None:
        """`write_many(items)` writes them all in one transaction and returns a result per
        item, in order; whatever it raises is raised to every caller of the batch."""
        self._write_many = write_many
        self._name = name
        self._waiting: list[tuple[T, Future[R]]] = []
        self._cond = threading.Condition()
        self._writer: threading.Thread | None = None  # started by the first item
        self._writing = 0  # items in the batch being written now

    def submit(self, item: T) -> Future[R]:
        """Queue `item`; its future resolves to its result once the transaction that holds
        it has committed (or to the batch's error)."""
        future: Future[R] = Future()
        with self._cond:
            self._waiting.append((item, future))
            if self._writer is None:
                self._writer = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._writer.start()
            self._cond.notify()
        return future

    @property
    def in_flight(self) -> int:
        """Items queued or being written, whose futures have not resolved yet (read without
        the lock: a gauge of the load, engine/pacing.py)."""
        return len(self._waiting) + self._writing

    def submissions_in_flight(self) -> int:
        """`in_flight`, as the engine's `Arrivals` asks it (engine/pacing.py): the daemon
        gives the engine the group commit of submissions itself."""
        return self.in_flight

    def write(self, item: T) -> R:
        """Write `item` (with whatever else is waiting) and return its result."""
        return self.submit(item).result()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._waiting:
                    self._cond.wait()
                batch, self._waiting = self._waiting, []
                self._writing = len(batch)
            try:
                results = self._write_many([item for item, _ in batch])
                if len(results) != len(batch):
                    raise RuntimeError(f"{len(results)} results for a batch of {len(batch)}")
            except BaseException as exc:  # every caller of the batch learns it; go on
                self._writing = 0
                for _, future in batch:
                    future.set_exception(exc)
                continue
            self._writing = 0
            for (_, future), result in zip(batch, results, strict=True):
                future.set_result(result)
