"""Python functions run as pool jobs, with futures for their results (Client.submit_fn).

A call becomes a job in three steps:
1. its function and arguments are pickled (sdk/payload.py) into a fresh directory of its
   own, `0700`, under the function directory (`$GPUPOOL_SDK_DIR`, else
   `$XDG_CACHE_HOME/gpupool/functions`, else `~/.cache/gpupool/functions`, `0700`): in a
   shared pool the job runs as the submitting user, who owns it; nobody else can read it;
2. the job runs `sys.executable -u -m gpupool.sdk.runner CALL OUTCOME` in this process's
   working directory (or the one asked for), with this process's environment, as
   `gpupool submit` would;
3. one watcher thread per Client polls its unfinished jobs and resolves each future from the
   outcome file when the job ends: the return value, the remote exception (raised as itself
   with the remote traceback as its `__cause__`, or as RemoteError), or JobFailed /
   JobCancelled when the job wrote no outcome. Then it removes the job's directory.

`future.cancel()` cancels the job (a JobFuture stays "pending" until its job ends, so it can
be cancelled while the job runs). The watcher is a daemon thread: a program that exits
without waiting for its futures leaves their jobs running, and their directories behind.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from gpupool.client.errors import ApiError, PoolUnreachable
from gpupool.client.http import Client as HttpClient
from gpupool.client.views import JobView
from gpupool.core.batch import MAX_IDS_PER_LIST
from gpupool.core.job import JobState
from gpupool.sdk.errors import JobCancelled, JobFailed, RemoteError, RemoteTraceback, typed
from gpupool.sdk.handle import FIRST_POLL_S, MAX_POLL_S, JobHandle
from gpupool.sdk.payload import (
    CALL_FILE,
    OUTCOME_FILE,
    PayloadError,
    Raised,
    Returned,
    read_outcome,
    task_call_file,
    write_call,
)

T = TypeVar("T")
log = logging.getLogger("gpupool.sdk")


class JobFuture(Future[T]):
    """A Future whose result comes from a pool job: `handle` is that job (status, logs).
    `cancel()` cancels the job too, running or not."""

    handle: JobHandle

    @property
    def job_id(self) -> int:
        return self.handle.id


def functions_dir() -> Path:
    """The directory of function payloads, made `0700` if missing; ValueError when it
    exists but others could read it or it is not this user's (it holds pickles that are
    run: one someone else can write to would run their code as you)."""
    named = os.environ.get("GPUPOOL_SDK_DIR")
    if named:
        root = Path(named)
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
        root = Path(cache) / "gpupool" / "functions"
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = root.stat()
    except OSError as exc:
        raise ValueError(
            f"cannot use {root} for function payloads: {exc.strerror or exc} "
            "(set GPUPOOL_SDK_DIR to a directory of yours)"
        ) from None
    if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
        raise ValueError(
            f"{root} must be yours and closed to others (mode 0700), to hold function "
            f"payloads: run `chmod 700 {root}` (or set GPUPOOL_SDK_DIR)"
        )
    return root


def new_call_dir(
    fn: Callable[..., object], args: Sequence[object], kwargs: Mapping[str, object]
) -> Path:
    """A fresh private directory holding the pickled call; removed again if pickling fails."""
    where = Path(tempfile.mkdtemp(prefix="call-", dir=functions_dir()))  # 0700
    try:
        write_call(where / CALL_FILE, fn, args, kwargs)
    except BaseException:
        shutil.rmtree(where, ignore_errors=True)
        raise
    return where


def new_map_dir(fn: Callable[..., object], items: Sequence[object]) -> Path:
    """A fresh private directory holding one call file per item (`fn(item)`, task i's in
    `task_call_file(i)`); removed again if pickling any of them fails."""
    where = Path(tempfile.mkdtemp(prefix="map-", dir=functions_dir()))  # 0700
    try:
        for index, item in enumerate(items):
            write_call(where / task_call_file(index), fn, (item,), {})
    except BaseException:
        shutil.rmtree(where, ignore_errors=True)
        raise
    return where


def rebuild(outcome: Raised, job_id: int) -> BaseException:
    """The exception to raise here for one raised in job `job_id`: itself, with the
    remote traceback as its `__cause__`, when it unpickles; else a RemoteError."""
    if outcome.exception is not None:
        try:
            exc = pickle.loads(outcome.exception)
        except Exception:
            exc = None
        if isinstance(exc, BaseException):
            exc.__cause__ = RemoteTraceback(f"in job {job_id}:\n{outcome.traceback}")
            return exc
    return RemoteError(outcome.type_name, outcome.message, outcome.traceback, job_id)


@dataclass
class _Watched:
    future: JobFuture[object]
    directory: Path  # removed when the last job whose files it holds has ended
    outcome: Path


class FunctionJobs:
    """The jobs of one Client's futures, and the thread that resolves them. It asks the
    daemon about all of them in one request a round (`GET /v1/jobs?id=...`, at most
    MAX_IDS_PER_LIST ids each), never one request per job: a `map` of 1,000 items would
    otherwise cost the daemon 1,000 requests every round (as `squeue -j` over one squeue
    per job)."""

    def __init__(self, http: HttpClient) -> None:
        self._http = http
        self._lock = threading.Condition()
        self._watched: dict[int, _Watched] = {}
        self._users: dict[Path, int] = {}  # directory -> its jobs not ended yet
        self._thread: threading.Thread | None = None

    def watch(
        self, handle: JobHandle, directory: Path, outcome: str = OUTCOME_FILE
    ) -> JobFuture[object]:
        """A future for the job `handle`, settled from its outcome file `outcome` in
        `directory` when the job ends; the directory is removed once every job watched
        with it has ended (the tasks of one mapped call share one)."""
        future: JobFuture[object] = JobFuture()
        future.handle = handle
        future.add_done_callback(_cancel_job_of)
        with self._lock:
            self._watched[handle.id] = _Watched(future, directory, directory / outcome)
            self._users[directory] = self._users.get(directory, 0) + 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="gpupool-sdk-futures", daemon=True
                )
                self._thread.start()
            self._lock.notify_all()  # poll soon: a new job may end quickly
        return future

    def _run(self) -> None:
        delay = FIRST_POLL_S
        while True:
            with self._lock:
                while not self._watched:
                    self._lock.wait()
                watched = dict(self._watched)
            for job_id in self._ended(watched):
                delay = FIRST_POLL_S
                with self._lock:
                    del self._watched[job_id]
            with self._lock:
                if self._watched and self._lock.wait(delay):
                    delay = FIRST_POLL_S  # woken by a new job
                else:
                    delay = min(delay * 2, MAX_POLL_S)

    def _ended(self, watched: Mapping[int, _Watched]) -> list[int]:
        """The jobs of `watched` that have ended, their futures settled and directories
        released: one list request per MAX_IDS_PER_LIST of them. A job the answer leaves
        out (gone from the pool) is asked about on its own, for the error that says so."""
        ids = sorted(watched)
        ended: list[int] = []
        for start in range(0, len(ids), MAX_IDS_PER_LIST):
            chunk = ids[start : start + MAX_IDS_PER_LIST]
            try:
                page = self._http.job_page(include_finished=True, ids=chunk)
            except PoolUnreachable as exc:  # a daemon restarting: ask again later
                log.debug("jobs %d-%d: %s", chunk[0], chunk[-1], exc)
                return ended
            views = {view.id: view for view in page.jobs}
            for job_id in chunk:
                view = views.get(job_id)
                if view is None:
                    done = self._ask(job_id, watched[job_id])
                else:
                    done = self._check(watched[job_id], view)
                if done:
                    ended.append(job_id)
        return ended

    def _ask(self, job_id: int, item: _Watched) -> bool:
        """A job the list left out, asked about on its own: whether it has ended (a job
        the pool no longer has settles its future with JobNotFound)."""
        try:
            view = item.future.handle.status()
        except PoolUnreachable as exc:
            log.debug("job %d: %s", job_id, exc)
            return False
        except ApiError as exc:
            try:
                self._settle(item, error=typed(exc))
            finally:
                self._release(item.directory)
            return True
        return self._check(item, view)

    def _check(self, item: _Watched, view: JobView) -> bool:
        """Whether the job of `view` has ended (its future then settled, its directory
        removed)."""
        if not view.state.terminal:
            return False
        try:
            self._settle(item, view=view)
        finally:
            self._release(item.directory)
        return True

    def _release(self, directory: Path) -> None:
        with self._lock:
            left = self._users.get(directory, 1) - 1
            if left > 0:
                self._users[directory] = left
                return
            self._users.pop(directory, None)
        shutil.rmtree(directory, ignore_errors=True)

    def _settle(
        self, item: _Watched, view: JobView | None = None, error: BaseException | None = None
    ) -> None:
        future = item.future
        if not future.set_running_or_notify_cancel():
            return  # cancelled here: the job was cancelled with it
        if error is None and view is not None:
            try:
                error, value = _outcome(view, item.outcome)
            except PayloadError as exc:
                error = exc
            if error is None:
                future.set_result(value)
                return
        future.set_exception(error)


def _outcome(view: JobView, path: Path) -> tuple[BaseException | None, object]:
    """(exception, None) or (None, value) of an ended job, from its outcome file."""
    outcome = read_outcome(path)
    if isinstance(outcome, Returned):
        return None, outcome.value
    if isinstance(outcome, Raised):
        return rebuild(outcome, view.id), None
    if view.state is JobState.CANCELLED:
        return JobCancelled(view), None
    return JobFailed(view), None


def _cancel_job_of(future: Future[object]) -> None:
    """Done callback: a future cancelled by its caller cancels its job."""
    if not future.cancelled() or not isinstance(future, JobFuture):
        return
    try:
        future.handle.cancel()
    except Exception as exc:  # noqa: BLE001 - a callback must not raise; say why instead
        log.warning("could not cancel job %d of a cancelled future: %s", future.job_id, exc)
