"""What the engine asks an executor to start for a job: its LaunchRequest (core/execution.py),
made from the job as the store committed it."""

from __future__ import annotations

from gpupool.core.execution import Allocation, ContainerLaunch, Handle, LaunchRequest, RankLayout
from gpupool.core.job import Job
from gpupool.core.warning_signal import run_warning
from gpupool.engine.environment import container_environment, job_environment


def launch_request(job: Job, time_limit_s: float) -> LaunchRequest:
    """What an executor is asked to start for `job`, now RUNNING on its node and GPUs,
    under `time_limit_s`: its command, environment, allocation, owner, ranks, image."""
    spec = job.spec
    assert job.node is not None
    return LaunchRequest(
        handle=Handle(job.id, job.restart_count),
        command=spec.command,
        env=job_environment(job),
        workdir=spec.workdir,
        time_limit_s=time_limit_s,
        grace_s=spec.grace_s,
        allocation=Allocation(job.node, job.gpus, job.gpu_memory_bytes),
        user=job.user,  # run as its owner where the executor runs jobs so (shared mode)
        umask=spec.umask,
        # One rank per GPU it holds (spec rules: a distributed job has whole GPUs).
        ranks=None if spec.distributed is None else RankLayout(len(job.gpus)),
        container=_container_launch(job),
        separate_stderr=spec.separate_stderr,
        mem_bytes=spec.resources.mem_bytes,
        cpus=spec.resources.cpus,
        warning=run_warning(spec.warning_signal),  # its --signal, or the checkpoint default
    )


def _container_launch(job: Job) -> ContainerLaunch | None:
    """A job with an image runs in it, with the engine settled at submit (service.py)."""
    spec = job.spec
    if spec.image is None:
        return None
    return ContainerLaunch(spec.image, spec.container_engine, container_environment(job))
