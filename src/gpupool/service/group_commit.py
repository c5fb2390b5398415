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

import asyncio
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# Where an item's result goes: a thread's future, or an event loop's future and its loop.
Waiter = Future[R] | tuple[asyncio.AbstractEventLoop, asyncio.Future[R]]
Outcome = tuple[Waiter[R], R | None, BaseException | None]  # a result, or the error
LoopOutcome = tuple[asyncio.Future[R], R | None, BaseException | None]


class GroupCommit(Generic[T, R]):
    def __init__(
        self, write_many: Callable[[Sequence[T]], Sequence[R]], name: str = "gpupool-commit"
    ) -> None:
        """`write_many(items)` writes them all in one transaction and returns a result per
        item, in order; whatever it raises is raised to every caller of the batch."""
        self._write_many = write_many
        self._name = name
        self._waiting: list[tuple[T, Waiter[R]]] = []
        self._cond = threading.Condition()
        self._writer: threading.Thread | None = None  # started by the first item
        self._writing = 0  # items in the batch being written now

    def submit(self, item: T) -> Future[R]:
        """Queue `item`; its future resolves to its result once the transaction that holds
        it has committed (or to the batch's error)."""
        future: Future[R] = Future()
        self._queue(item, future)
        return future

    def submit_in_loop(self, item: T) -> asyncio.Future[R]:
        """`submit` for a caller in an event loop: a future of the running loop, resolved in
        it, with those of the batch's other items from the same loop in one call of the loop
        (a thread's future wrapped for the loop took two futures and a wake-up of the loop
        per item: docs/benchmarks.md, issue 35 goal 4)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._queue(item, (loop, future))
        return future

    def _queue(self, item: T, waiter: Waiter[R]) -> None:
        with self._cond:
            self._waiting.append((item, waiter))
            if self._writer is None:
                self._writer = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._writer.start()
            self._cond.notify()

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
                failed: list[Outcome[R]] = [(waiter, None, exc) for _, waiter in batch]
                _settle(failed)
                continue
            self._writing = 0
            done: list[Outcome[R]] = [
                (waiter, result, None) for (_, waiter), result in zip(batch, results, strict=True)
            ]
            _settle(done)


def _settle(outcomes: list[Outcome[R]]) -> None:
    """Resolve each waiter to its result or the error: a thread's future here, an event
    loop's futures in their loop, one call a loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[LoopOutcome[R]]] = {}
    for waiter, result, error in outcomes:
        if isinstance(waiter, Future):
            _resolve(waiter, result, error)
        else:
            loop, future = waiter
            by_loop.setdefault(loop, []).append((future, result, error))
    for loop, futures in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle_in_loop, futures)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass


def _settle_in_loop(futures: list[LoopOutcome[R]]) -> None:
    for future, result, error in futures:
        if not future.done():  # done: cancelled, its caller left
            _resolve(future, result, error)


def _resolve(
    future: Future[R] | asyncio.Future[R], result: R | None, error: BaseException | None
) -> None:
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)  # type: ignore[arg-type]  # R, as written
