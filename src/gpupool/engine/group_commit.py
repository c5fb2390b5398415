"""Group commit: writes that arrive while one is being made are made together, in one
transaction, so a burst of submissions syncs the disk once per batch instead of once each.

Every submission is durable before it is acknowledged (docs/ARCHITECTURE.md, "A job's
life"), and on SQLite with synchronous=FULL each commit waits for the disk (a few
milliseconds here): one at a time, 100 clients submitting at once queue behind 100 syncs.
So the first caller becomes the leader and writes what is waiting; callers that arrive
meanwhile wait, and the next leader writes all of them at once (as PostgreSQL's group
commit and SQLite's own batching of a transaction do). A lone caller writes at once: no
added delay.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class _Slot(Generic[T, R]):
    __slots__ = ("item", "result", "error", "done")

    def __init__(self, item: T) -> None:
        self.item = item
        self.result: R | None = None
        self.error: BaseException | None = None
        self.done = False


class GroupCommit(Generic[T, R]):
    def __init__(self, write_many: Callable[[Sequence[T]], Sequence[R]]) -> None:
        """`write_many(items)` writes them all in one transaction and returns a result per
        item, in order; whatever it raises is raised to every caller of the batch."""
        self._write_many = write_many
        self._waiting: list[_Slot[T, R]] = []
        self._writing = False
        self._cond = threading.Condition()

    def write(self, item: T) -> R:
        """Write `item` (with whatever else is waiting) and return its result once the
        transaction that holds it has committed."""
        slot: _Slot[T, R] = _Slot(item)
        with self._cond:
            self._waiting.append(slot)
            while self._writing and not slot.done:
                self._cond.wait()
            if not slot.done:  # the leader now: write everything that waits
                self._writing = True
                batch, self._waiting = self._waiting, []
        if not slot.done:
            try:
                results = self._write_many([s.item for s in batch])
                for s, r in zip(batch, results, strict=True):
                    s.result = r
            except BaseException as exc:  # every caller of the batch learns it
                for s in batch:
                    s.error = exc
            finally:
                with self._cond:
                    for s in batch:
                        s.done = True
                    self._writing = False
                    self._cond.notify_all()
        if slot.error is not None:
            raise slot.error
        assert slot.result is not None
        return slot.result
