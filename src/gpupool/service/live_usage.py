"""A running job's CPU time and memory, read from its cgroup when asked (core/cgroup_usage.py):
for `show` and the dashboard's job page (`PoolService.with_live_usage`) and for `/metrics`
(service/pool_stats.py).

Only an executor that counts its runs has them: the local executor, whose `run_usage` reads
the run's cgroup (executor/local.py). It is not part of the executor contract
(core/execution.py): a backend's scheduler keeps its own books, and its jobs have none.
A read is a few small files of the run's cgroup, no store and no process of the job.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, runtime_checkable

from gpupool.core.cgroup_usage import CgroupUsage, live_usage
from gpupool.core.execution import Handle, RunUsage
from gpupool.core.job import Job, JobState
from gpupool.engine.state import handle_of


@runtime_checkable
class CountsRunUsage(Protocol):
    """An executor that can say what a running run has used so far (None: nothing counts
    it, e.g. a daemon run with `--cgroups off`)."""

    def run_usage(self, handle: Handle) -> RunUsage | None: ...


def live_cgroup_usage(executor: object, job: Job) -> CgroupUsage | None:
    """What `job`'s run under way has used so far, read now, with its earlier runs' CPU time
    in the all-runs figure; None when it is not running on `executor` or nothing counts it."""
    if job.state is not JobState.RUNNING or job.spec.backend is not None:
        return None
    if not isinstance(executor, CountsRunUsage):
        return None
    run = executor.run_usage(handle_of(job))
    if run is None:
        return None
    return live_usage(run, job.cgroup_usage, job.spec.resources.mem_bytes)


def with_live_usage(executor: object, job: Job) -> Job:
    """`job` with its run under way's figures in place of its last ended run's, when its
    executor counts them; else `job` as it is."""
    live = live_cgroup_usage(executor, job)
    return job if live is None else dataclasses.replace(job, cgroup_usage=live)
