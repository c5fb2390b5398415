"""Many jobs in one submission (`POST /v1/jobs/batch`, the SDK's `Client.submit_many`): a
sweep of distinct jobs (other commands, other resources) that an array cannot express.

The contract: every job is checked as a single submission is (`PoolService.submission`:
its project, backend, whether it could ever run), and the first one refused refuses the
whole batch, naming it (`specs[3]: ...`); then all are stored in one transaction (one sync
of the disk) or none is. An array is refused inside a batch: it is already many jobs in one
submission, stored its own way (service/arrays.py). With a batch token T, job i's token is
T.i, so a batch sent again after a lost answer returns the jobs stored the first time.

Why: one HTTP request per job costs the daemon ~3 ms of CPU (docs/benchmarks.md, issue 16),
almost all of it the HTTP stack; a batch pays it once, and its jobs cost ~0.2 ms each. The
engine hears of a batch in one message, and the daemon's log says it in one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpupool.core.batch import MAX_BATCH
from gpupool.core.job import Job, JobSpec
from gpupool.service.pool_service import PoolService, log
from gpupool.service.refusal import RequestRefused


@dataclass(frozen=True)
class BatchItem:
    """One job of a batch: its spec, and whether its project was given (else the user's
    default project applies, as for a single submission)."""

    spec: JobSpec
    project_given: bool


def batch_token(token: str | None, index: int) -> str | None:
    """The token of a batch's job `index`: the batch's, with the index."""
    return None if token is None else f"{token}.{index}"


def submit_batch(
    service: PoolService,
    items: Sequence[BatchItem],
    user: str,
    now: float,
    token: str | None = None,
) -> list[Job]:
    """Queue every job of `items` for `user`, in order, or none (see the module's contract);
    the stored jobs. RequestRefused, naming the job, when one could never run."""
    if len(items) > MAX_BATCH:
        raise RequestRefused(
            "batch_too_large",
            f"specs: {len(items)} jobs in one batch; at most {MAX_BATCH} (send several)",
        )
    news = []
    for index, item in enumerate(items):
        if item.spec.array is not None:
            raise RequestRefused(
                "array_in_batch",
                f"specs[{index}].array: an array cannot be part of a batch; submit it on its own",
            )
        try:
            news.append(
                service.submission(
                    item.spec,
                    user,
                    now,
                    batch_token(token, index),
                    project_given=item.project_given,
                )
            )
        except RequestRefused as exc:
            raise RequestRefused(exc.code, f"specs[{index}]: {exc.message}") from None
    jobs = service.store.submit_many(news)
    ours = [job for job in jobs if job.user == user]
    service.engine.stored(*ours)  # one message for the batch, not one per job
    if len(ours) < len(jobs):  # a token named another user's submission: as `submitted`
        raise RequestRefused(
            "token_in_use",
            "this batch's token was already used by another user's submission: send a new "
            f"token ({len(ours)} of its {len(jobs)} jobs are queued)",
        )
    projects = sorted({job.spec.project for job in jobs})
    log.info(
        "jobs %d-%d submitted by %s to project%s %s: a batch of %d",
        jobs[0].id,
        jobs[-1].id,
        user or "?",
        "" if len(projects) == 1 else "s",
        ", ".join(projects),
        len(jobs),
    )
    return jobs
