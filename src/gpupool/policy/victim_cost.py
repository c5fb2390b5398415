"""What stopping a running job costs, and whether a preemption the quotas do not require may
stop it: the one measure every preemption rule shares (priority classes, the default order's
preemption, defragmentation), so they choose victims alike.

- **Lost work** (`lost_gpu_s`): GPU-seconds of the current attempt that a restart throws away.
  A job that does not checkpoint loses its whole attempt; one that checkpoints
  (`RunningJob.checkpointing`) loses at most `PolicyConfig.checkpoint_loss_s` of it, the work
  since its last checkpoint (the pool does not see checkpoints, so this is a bound it
  assumes). A job that just started loses little either way.
- **Eligible** (`may_preempt`): preemptible, it ran at least `min_runtime_s` in this attempt
  (no job thrashes: each attempt gets that much), and it was requeued fewer than
  `preempt_max_restarts` times (a job already stopped that often is left to finish).

Quota reclaim (policy/reclaim.py) honours a guarantee and keeps its own rules; it does not
read the restart bound.
"""

from __future__ import annotations

from gpupool.policy.orders import gpu_amount
from gpupool.policy.snapshot import PolicyConfig, RunningJob


def lost_s(job: RunningJob, now: float, config: PolicyConfig) -> float:
    """Seconds of its current attempt stopping `job` at `now` throws away."""
    run = max(0.0, now - job.start_time)
    if job.checkpointing:
        run = min(run, config.checkpoint_loss_s)
    return run


def lost_gpu_s(job: RunningJob, now: float, config: PolicyConfig) -> float:
    """GPU-seconds of work stopping `job` at `now` throws away (module docstring)."""
    return lost_s(job, now, config) * gpu_amount(job.resources)


def may_preempt(
    job: RunningJob, now: float, config: PolicyConfig, min_runtime_s: float | None = None
) -> bool:
    """Whether a preemption the quotas do not require may stop `job` now (module docstring).
    `min_runtime_s`: the floor to use instead of the pool's (a project's own)."""
    floor = config.min_runtime_s if min_runtime_s is None else min_runtime_s
    return (
        job.preemptible
        and now - job.start_time >= floor
        and job.restarts < config.preempt_max_restarts
    )
