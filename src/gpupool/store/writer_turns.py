"""Writers of one process take turns on SQLite's write lock instead of racing for it.

SQLite lets one writer in at a time (BEGIN IMMEDIATE) and makes the others wait in its busy
handler, which sleeps between tries: 1, 2, 5, 10, 15, 20, 25 ms and then up to 100 ms. So a
writer of this daemon could sleep long after the lock was free. Under a stream of
submissions that was a stall every few seconds: the engine's write of pending jobs' reasons
waited behind the group commits, got in, and then the next group commit slept in the busy
handler ~100 ms with every submission of the batch waiting on it (bench/load.py: p99 ~400 ms).

Here each writer of the process first takes its turn on a lock, and goes in the moment the
one before it is done; busy_timeout still covers writers of other processes (a second
daemon's refusal, `gpupool` offline commands). A writer that gets no turn within
`TURN_WAIT_S` (busy_timeout's 10 s) goes in without one, as before: SQLite then answers
"database is locked" as it would have. PostgreSQL has row locks: its writers take no turns.
"""

from __future__ import annotations

import threading
from types import TracebackType

TURN_WAIT_S = 10.0  # as PRAGMA busy_timeout (store/migrations)


class WriterTurns:
    """A context manager around each write transaction (re-entrant: a writer that writes
    again inside its transaction keeps its turn, and SQLite decides as it did)."""

    def __init__(self, serial: bool) -> None:
        self.serial = serial  # False: every writer goes in at once (PostgreSQL)
        self.waiting = 0  # writers waiting for their turn now
        self._lock = threading.RLock()
        self._count = threading.Lock()  # for `waiting`
        self._held = threading.local()

    def __enter__(self) -> None:
        got = False
        if self.serial:
            with self._count:
                self.waiting += 1
            try:
                got = self._lock.acquire(timeout=TURN_WAIT_S)
            finally:
                with self._count:
                    self.waiting -= 1
        stack: list[bool] = self._held.__dict__.setdefault("stack", [])
        stack.append(got)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._held.stack.pop():
            self._lock.release()
