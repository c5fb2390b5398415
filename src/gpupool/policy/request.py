"""Three rules about a request that every part of the pass needs, written once.

- **The request key** (`request_key`): what makes two requests the same for the pass. What
  the pass learns about one request (it fits nowhere now, it finds no reclaim plan) holds for
  every job asking the same, for the rest of the pass, because what is free only shrinks.
- **The expected end** (`expected_end`): a job started at `start` is expected to end at
  `start + time limit`, the policy's `default_time_limit_s` for a job without one. Backfill's
  timeline, the reservation and the running view all use it.
- **Whole or part of a GPU** (`holds_whole_gpus`): a job holds its GPUs whole unless it asks
  for a fraction or an amount of GPU memory, or was granted an amount (a running job). A job
  holding part of a GPU counts for what `core.job.gpu_count` says, which depends on the GPU;
  one holding whole GPUs counts them.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter

from gpupool.core.job import Resources

# (gpus, gpu_type, cpus, mem_bytes, gpu_memory_bytes, gpu_fraction). A tuple, not the frozen
# dataclass: hashing a tuple runs no Python code, and the pass looks one up per pending job;
# an attrgetter builds it in C.
RequestKey = tuple[int, str | None, int | None, int | None, int | None, float | None]
request_key: Callable[[Resources], RequestKey] = attrgetter(
    "gpus", "gpu_type", "cpus", "mem_bytes", "gpu_memory_bytes", "gpu_fraction"
)


def counts_only(res: Resources) -> bool:
    """Only the GPU count matters: no GPU type, CPUs, memory or part of a GPU. On nodes
    without shared GPUs such a request is answered from counts alone (the fast paths)."""
    return not (
        res.gpu_type
        or res.cpus
        or res.mem_bytes
        or res.gpu_memory_bytes is not None
        or res.gpu_fraction is not None
    )


def expected_end(start: float, limit_s: float | None, default_limit_s: float) -> float:
    """When a job started at `start` with time limit `limit_s` (None: the default) ends."""
    return start + (default_limit_s if limit_s is None else limit_s)


def holds_whole_gpus(res: Resources, granted_bytes: int | None = None) -> bool:
    """Whether a job holds (or would hold) its GPUs whole; `granted_bytes`: the GPU memory a
    running job was granted, if any."""
    return res.gpu_fraction is None and res.gpu_memory_bytes is None and granted_bytes is None
