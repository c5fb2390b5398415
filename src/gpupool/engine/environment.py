"""The environment a job process sees."""

from __future__ import annotations

from gpupool.core.job import Job


def job_environment(job: Job) -> dict[str, str]:
    """The submitter's environment, then the job's own --env, then what the pool owns.

    The pool's variables come last so no user setting can point a job at GPUs it does not
    hold. CUDA_DEVICE_ORDER=PCI_BUS_ID makes CUDA number GPUs as NVML and nvidia-smi do, so
    the indices in CUDA_VISIBLE_DEVICES mean the GPUs the pool assigned.
    """
    env = dict(job.spec.base_env)
    env.update(container_environment(job))
    return env


def container_environment(job: Job) -> dict[str, str]:
    """What a job in a container sees (docs/containers.md): the job's own --env, then what
    the pool owns; not the submitter's shell environment, which describes the host (its
    PATH, LD_LIBRARY_PATH, virtualenv) and would break the image's."""
    env = dict(job.spec.env)
    gpus = ",".join(str(g) for g in job.gpus)
    env.update(
        {
            "CUDA_VISIBLE_DEVICES": gpus,
            "NVIDIA_VISIBLE_DEVICES": gpus if gpus else "void",
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "GPUPOOL_JOB_ID": str(job.id),
            "GPUPOOL_JOB_NAME": job.name,
            "GPUPOOL_GPUS": gpus,
            "GPUPOOL_NODE": job.node or "",
            "GPUPOOL_PROJECT": job.spec.project,
            "GPUPOOL_USER": job.user,
            "GPUPOOL_RESTART_COUNT": str(job.restart_count),
        }
    )
    task = job.spec.array_task
    if task is not None:  # one task of an array (--array): which one
        env["GPUPOOL_ARRAY_INDEX"] = str(task.index)
        env["GPUPOOL_ARRAY_JOB_ID"] = str(job.array_id if job.array_id is not None else job.id)
    memory = job.gpu_memory_bytes
    if memory:
        # A fractional job's share of its GPU, in bytes: frameworks can cap themselves to it
        # (e.g. torch.cuda.set_per_process_memory_fraction); nothing enforces it in hardware.
        env["GPUPOOL_GPU_MEMORY_LIMIT"] = str(memory)
    return env


# Set by a backend for each run where it places it (Slurm, Ray, the device plugin): never
# by the pool, which places nothing of a backend's job.
_PLACED_BY_BACKEND = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")


def backend_job_environment(job: Job) -> dict[str, str]:
    """What a backend's job gets from the pool (`BackendRequest.job_env`; docs/backends.md):
    its own --env, then the pool's variables that mean something there (GPUPOOL_JOB_ID,
    GPUPOOL_JOB_NAME, GPUPOOL_PROJECT, GPUPOOL_USER, GPUPOOL_RESTART_COUNT, GPUPOOL_BACKEND,
    GPUPOOL_NODES, an array task's index). No GPU or node variable: the backend places it."""
    env = {k: v for k, v in job.spec.env if k not in _PLACED_BY_BACKEND}
    env.update(
        {
            "GPUPOOL_JOB_ID": str(job.id),
            "GPUPOOL_JOB_NAME": job.name,
            "GPUPOOL_PROJECT": job.spec.project,
            "GPUPOOL_USER": job.user,
            "GPUPOOL_RESTART_COUNT": str(job.restart_count),
            "GPUPOOL_BACKEND": job.spec.backend or "",
            "GPUPOOL_NODES": str(job.spec.nodes),
        }
    )
    task = job.spec.array_task
    if task is not None:
        env["GPUPOOL_ARRAY_INDEX"] = str(task.index)
        env["GPUPOOL_ARRAY_JOB_ID"] = str(job.array_id if job.array_id is not None else job.id)
    return env


def backend_full_environment(job: Job) -> dict[str, str]:
    """`LaunchRequest.env` of a backend's job: the submitter's environment (as sbatch
    --export=ALL passes it), then `backend_job_environment`."""
    env = {k: v for k, v in job.spec.base_env if k not in _PLACED_BY_BACKEND}
    env.update(backend_job_environment(job))
    return env
