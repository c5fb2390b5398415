"""What the SDK raises, besides the client's own errors (gpupool.client.errors).

- A pool that cannot be reached: the client's `PoolUnreachable` and its kinds
  (`DaemonNotRunning`, `DaemonTimeout`, ...), as they are: `str()` says what the CLI says.
- The daemon's refusals, typed by what they mean (each is an `ApiError`, with its HTTP
  `status`, `code`, `message` and `body`): `JobRefused` (a submission the daemon would not
  queue: a bad field, more GPUs than any node has, a project you are not a member of),
  `Forbidden` (403: another user's job), `JobNotFound` (404).
- A function job that ended without a result: `JobFailed` (killed, out of memory, past its
  time limit), `JobCancelled`.
- A remote exception that cannot be rebuilt here: `RemoteError`. One that can is raised as
  itself, with the remote traceback as its `__cause__` (a `RemoteTraceback`), as
  `concurrent.futures.ProcessPoolExecutor` does.

Standard library only, so that the job runner (sdk/runner.py) can import it cheaply.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from gpupool.client.errors import ApiError
from gpupool.client.views import JobView
from gpupool.core.job import JobState


class JobRefused(ApiError):
    """The daemon would not queue the job; `field_errors()` lists the bad fields."""

    def __str__(self) -> str:
        return f"job refused: {self.message}"


class Forbidden(ApiError):
    """403: the caller may not do this (another user's job: only its owner, an admin of
    its project or a pool admin may cancel it or read its log; docs/security.md)."""


class JobNotFound(ApiError):
    """404: no such job (or project)."""


def typed(
    exc: ApiError, submitting: bool = False, refusals: frozenset[int] = frozenset()
) -> ApiError:
    """`exc` as the SDK's type for it (the same fields): JobRefused for any refusal of a
    submission or a status in `refusals`, else Forbidden for 403 and JobNotFound for 404;
    others unchanged."""
    if exc.status in refusals or (submitting and exc.status not in (401, 429) and exc.status < 500):
        kind: type[ApiError] = JobRefused
    elif exc.status == 403:
        kind = Forbidden
    elif exc.status == 404:
        kind = JobNotFound
    else:
        return exc
    return kind(exc.status, exc.code, exc.message, exc.body)


@contextmanager
def api_errors(submitting: bool = False, refusals: frozenset[int] = frozenset()) -> Iterator[None]:
    """Turns the client's ApiError into the SDK's typed one (see `typed`), raised from
    nothing (the client's frame is noise to an SDK user)."""
    try:
        yield
    except ApiError as exc:
        raise typed(exc, submitting, refusals) from None


class JobFailed(RuntimeError):
    """A function job ended without writing its result: killed (out of memory, SIGKILL),
    stopped at its time limit, or its interpreter failed before the function ran. `job` is
    its final view (state, exit code, reason)."""

    def __init__(self, job: JobView) -> None:
        super().__init__(ended_without_result(job))
        self.job = job

    @property
    def job_id(self) -> int:
        return self.job.id


class JobCancelled(JobFailed):
    """The job was cancelled (by someone, or something, other than this future)."""


def final_text(job: JobView) -> str:
    """'job 3 SUCCEEDED (exit 0)', 'job 4 CANCELLED before it started': the CLI's words
    (`gpupool wait`), never 'exit None'."""
    head = f"job {job.id} {job.state.value}"
    if job.exit_code is not None:
        return f"{head} (exit {job.exit_code})"
    if not job.start_time:
        return f"{head} before it started"
    return f"{head} (no exit code{': ' + job.reason if job.reason else ''})"


def ended_without_result(job: JobView) -> str:
    what = final_text(job)
    if job.state is JobState.TIMEOUT:
        why = "it was stopped at its time limit before the function returned"
    elif job.state is JobState.CANCELLED:
        why = "it was cancelled before the function returned"
    elif job.exit_code == 128 + 9:  # the executor's code for a signal: 128 + its number
        why = "it was killed (SIGKILL: out of memory?) before the function returned"
    elif job.exit_code is not None and job.exit_code > 128:
        why = f"it was stopped by signal {job.exit_code - 128} before the function returned"
    else:
        why = (
            "it wrote no result: its interpreter or the runner failed before the function returned"
        )
    return f"{what}: {why}; its output: `gpupool logs {job.id}`"


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a job, as text: the `__cause__` of that
    exception when it is raised here, so an uncaught one prints both tracebacks."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text.rstrip()}\n"""'


class RemoteError(Exception):
    """An exception raised in a job that cannot be rebuilt here (its class cannot be
    imported, or it could not be pickled): its type's name, message and traceback text."""

    def __init__(self, type_name: str, message: str, traceback: str, job_id: int | None = None):
        super().__init__(type_name, message, traceback, job_id)
        self.type_name = type_name
        self.message = message
        self.traceback = traceback
        self.job_id = job_id

    def __str__(self) -> str:
        where = f" in job {self.job_id}" if self.job_id is not None else ""
        head = f"{self.type_name}{where}: {self.message}"
        return f"{head}\n\nRemote traceback:\n{self.traceback.rstrip()}"
