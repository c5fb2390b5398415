"""A job as `decide` reads it, built one way for the daemon's engine and for the simulator.

Both drive the same `decide`, and a replay predicts the daemon only if both tell it the same
facts about the same job. So the mapping is written once, here:

- `pending_job`: a waiting job from its request (`core.job.JobSpec`: resources, priority
  class, project, --begin, preemptible by its class unless it says) and what the request
  does not hold (its id, owner, submit time, and the time limit it runs under).
- `running_pieces`: a started job is the same facts plus where and when it runs, one piece
  per node (a job spread over nodes holds whole GPUs there: `resources.gpus = len(gpus)`).
  Built from its `PendingJob`, so a running job can never disagree with the waiting one.
- `placed`: the (node, GPUs) of a `Start`, every node of a spread job.

The two sides differ only in what they pass: the time limit (the daemon's is the one it
enforces, engine/limits.py; the replay's is its runtime estimate, sim/engine.py) and the
oracle facts only the replay knows (`runtime_hint_s`, `attained_s`, which no default-profile
decision reads). The `Snapshot` around these is built by each side with the policy's own
constructor (the daemon adds its store version and foreign GPU memory, the replay its kept
`RunningView`); tests/unit/test_same_decisions.py replays one job set through both and
checks that they decide alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpupool.core.job import JobSpec, Resources
from gpupool.policy.snapshot import PendingJob, RunningJob, Start

Place = tuple[str, tuple[int, ...]]  # (node, GPU indices held there)


def pending_job(
    job_id: int,
    spec: JobSpec,
    user: str,
    submit_time: float,
    time_limit_s: float | None,
    runtime_hint_s: float | None = None,
    attained_s: float = 0.0,
    restarts: int = 0,
    checkpointing: bool = False,
) -> PendingJob:
    """The waiting job `job_id` (module docstring). `time_limit_s`: the limit it runs under
    (None: the policy's default)."""
    return PendingJob(
        id=job_id,
        resources=spec.resources,
        priority=spec.priority,
        submit_time=submit_time,
        user=user,
        project=spec.project,
        time_limit_s=time_limit_s,
        begin_time=spec.begin_time,
        preemptible=spec.is_preemptible,
        runtime_hint_s=runtime_hint_s,
        attained_s=attained_s,
        restarts=restarts,
        checkpointing=checkpointing,
    )


def running_pieces(
    job: PendingJob,
    start_time: float,
    places: Sequence[Place],
    gpu_memory_bytes: int | None = None,
) -> tuple[RunningJob, ...]:
    """`job` running since `start_time` on `places`, one `RunningJob` per node; with one
    place it keeps its own resources, spread over several it holds whole GPUs on each.
    `gpu_memory_bytes`: the GPU memory a fractional job was granted."""
    one = len(places) == 1
    return tuple(
        RunningJob(
            id=job.id,
            node=node,
            gpus=gpus,
            resources=job.resources if one else Resources(gpus=len(gpus)),
            start_time=start_time,
            priority=job.priority,
            user=job.user,
            project=job.project,
            time_limit_s=job.time_limit_s,
            preemptible=job.preemptible,
            gpu_memory_bytes=gpu_memory_bytes,
            runtime_hint_s=job.runtime_hint_s,
            attained_s=job.attained_s,
            restarts=job.restarts,
            checkpointing=job.checkpointing,
        )
        for node, gpus in places
    )


def placed(start: Start) -> tuple[Place, ...]:
    """Every (node, GPUs) a `Start` gives its job: its first node, then the others."""
    return ((start.node, start.gpus), *start.more)
