"""What the store keeps of jobs run by a backend (docs/backends.md): the start of a run the
backend's scheduler started (no GPU of the pool is allocated to it), the backend's own
name for the run (`jobs.backend_ref`), and the pool's id that backends put in their run
names (`meta.pool_id`)."""

from __future__ import annotations

import secrets
import string
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TypeVar

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from gpupool.core.job import Job, JobState
from gpupool.store import models
from gpupool.store.models import META_ROW_ID, JobRow, MetaRow

T = TypeVar("T")

POOL_ID_LENGTH = 8
_POOL_ID_ALPHABET = string.ascii_lowercase + string.digits


class BackendMethods:
    def _write_retrying(self, op: Callable[[Session], T]) -> T:
        raise NotImplementedError  # the Store's (repository.py)

    def _read(self) -> AbstractContextManager[Session]:
        raise NotImplementedError

    def _write(self) -> AbstractContextManager[Session]:
        raise NotImplementedError

    def pool_id(self) -> str:
        """The pool's id (core.backends.BackendContext.pool_id): 8 characters of [a-z0-9],
        chosen at random the first time and the same ever after, for every daemon of this
        database (two daemons racing to choose keep the first one written)."""
        with self._read() as s:
            known = s.execute(select(MetaRow.pool_id).where(MetaRow.id == META_ROW_ID)).scalar()
        if known:
            return str(known)
        chosen = "".join(secrets.choice(_POOL_ID_ALPHABET) for _ in range(POOL_ID_LENGTH))
        with self._write() as s:
            s.execute(
                update(MetaRow)
                .where(MetaRow.id == META_ROW_ID, MetaRow.pool_id.is_(None))
                .values(pool_id=chosen)
            )
            kept = s.execute(select(MetaRow.pool_id).where(MetaRow.id == META_ROW_ID)).scalar()
        return str(kept)

    def start_in_backend(
        self,
        job_id: int,
        start_time: float,
        backend: str,
        ref: str | None,
        node: str | None = None,
        gpus: Sequence[int] = (),
    ) -> Job | None:
        """A PENDING job the backend reports running: RUNNING since `start_time` (when the
        pool first saw it run), on no GPU of the pool's own nodes. `node`: where it runs as
        the pool names it (`hpc/c1`, `hpc/c1+c2` for a gang; engine/admission.py), and
        `gpus`, the GPUs it holds there (the pool's indices, in node order: fair share and
        accounting count its GPU-hours as a local job's, a restart seats it on them again). None (nothing
        written) when the job is no longer PENDING (cancelled meanwhile)."""

        def op(s: Session) -> Job | None:
            row = s.get(JobRow, job_id)
            if row is None or row.state is not JobState.PENDING:
                return None
            where = backend if ref is None else f"{backend} ({ref})"
            models.transition(s, row, JobState.RUNNING, start_time, f"started in backend {where}")
            row.start_time, row.reason = start_time, ""
            if node is not None:
                row.node, row.gpus = node, list(gpus)
            if ref is not None:
                row.backend_ref = ref
            return models.load_jobs(s, JobRow.id == job_id)[0]

        return self._write_retrying(op)

    def route_to_backend(self, job_id: int, backend: str, now: float, cause: str) -> Job | None:
        """A PENDING job of `--backend any` goes to `backend` (one of its `route_to`): its
        spec names that backend from now on and routes nowhere else, and its history says
        why (`cause`). None (nothing written) when it is no longer PENDING, or `backend` is
        not one of its routes (a stale instruction)."""

        def op(s: Session) -> Job | None:
            row = s.get(JobRow, job_id)
            if row is None or row.state is not JobState.PENDING:
                return None
            spec = dict(row.spec)
            if backend not in (spec.get("route_to") or ()):
                return None
            spec["backend"] = backend
            spec.pop("route_to", None)
            row.spec = spec
            models.note(s, row, now, cause)
            return models.load_jobs(s, JobRow.id == job_id)[0]

        return self._write_retrying(op)

    def set_backend_ref(self, job_id: int, ref: str) -> Job | None:
        """Keep the backend's name for the job's current run; None when the job is gone
        or has ended."""

        def op(s: Session) -> Job | None:
            row = s.get(JobRow, job_id)
            if row is None or row.state.terminal:
                return None
            row.backend_ref = ref
            return models.load_jobs(s, JobRow.id == job_id)[0]

        return self._write_retrying(op)
