"""What the Store's mixins (projects.py, lease.py) stand on: its sessions, and one retry for
two writers creating the same row at once. Store (repository.py) provides the sessions."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TypeVar

from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

T = TypeVar("T")


class SessionMethods:
    def _read(self) -> AbstractContextManager[Session]:
        raise NotImplementedError

    def _write(self) -> AbstractContextManager[Session]:
        raise NotImplementedError

    def _write_core(self) -> AbstractContextManager[Connection]:
        """A write transaction on a Core connection: `_write` without the ORM session, for
        the writes of every submission and pass, where a session's set-up and commit were
        a third of their cost (docs/benchmarks.md, issue 35 goal 4)."""
        raise NotImplementedError

    def _write_once_more_on_conflict(self, op: Callable[[Session], T]) -> T:
        """`op` in a write transaction; once more if it hit a unique key another writer has
        just used (PostgreSQL): on the second try `op` reads the other writer's row."""
        try:
            with self._write() as s:
                return op(s)
        except IntegrityError:
            with self._write() as s:
                return op(s)
