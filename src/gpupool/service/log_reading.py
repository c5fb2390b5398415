"""Reading a job's log for the API (`GET /v1/jobs/ID/log`): its combined output, one rank's,
or its stderr; from an offset, or from where its last N lines start (service/log_tail.py)."""

from __future__ import annotations

from dataclasses import dataclass

from gpupool.core.execution import Executor, Handle
from gpupool.core.job import Job, JobState
from gpupool.service.log_tail import tail_offset
from gpupool.service.refusal import RequestRefused

MAX_LOG_CHUNK = 1 << 20


@dataclass(frozen=True)
class LogChunk:
    data: bytes
    offset: int  # where the next read starts
    state: JobState
    size: int | None = None  # the log's length when read: where a tail starts from


def read_job_log(
    job: Job,
    where: Executor | None,
    offset: int,
    limit: int = MAX_LOG_CHUNK,
    rank: int | None = None,
    tail: int | None = None,
    stderr: bool = False,
) -> LogChunk:
    """`job`'s combined output as `where` (its executor; None: its backend is not configured
    here, nothing to read) keeps it, or with `rank` that rank's alone (RequestRefused
    "no_such_rank" unless the job is distributed with that rank), or with `stderr` its
    stderr (RequestRefused "no_separate_stderr" unless it was submitted with
    --separate-stderr); with `tail`, from where its last `tail` lines start instead of
    `offset`."""
    job_id = job.id
    if stderr and not job.spec.separate_stderr:
        message = (
            f"job {job_id} keeps its stdout and stderr together in one log: "
            "submit with --separate-stderr to keep them apart"
        )
        raise RequestRefused("no_separate_stderr", message)
    if rank is not None:
        # GPUs held, or asked for per node (pending, or a backend's job) on its nodes
        ranks = (len(job.gpus) or job.spec.resources.gpus) * job.spec.nodes
        if job.spec.distributed is None:
            raise RequestRefused("no_such_rank", f"job {job_id} is not distributed: no ranks")
        if not 0 <= rank < ranks:
            message = f"job {job_id} has ranks 0..{ranks - 1}, not {rank}"
            raise RequestRefused("no_such_rank", message)
    handle = Handle(job.id, job.restart_count)
    if where is None:
        return LogChunk(b"", offset, job.state, None)
    if tail is not None:
        size = where.logs(handle, 0, 0, rank, stderr).size or 0

        def read(at: int, n: int) -> bytes:
            return where.logs(handle, at, n, rank, stderr).data

        offset = tail_offset(read, size, tail)
    chunk = where.logs(handle, offset, min(limit, MAX_LOG_CHUNK), rank, stderr)
    return LogChunk(chunk.data, chunk.offset, job.state, chunk.size)
