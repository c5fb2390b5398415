"""What a GPU monitor reports: a sample of each GPU, the processes on it, and whose they are.

Pure data, shared by the samplers (gpupool.monitor: NVML on a real machine, a simulated one
on a declared inventory) and whatever stores, shows or acts on the samples. A field a GPU
or driver does not report is None, never a guess; a sample from the simulated sampler says
so (`simulated`), and everything that shows it must say so too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

# GPUPOOL_SIMULATED_UTIL in a job's environment: how busy the simulated sampler shows its
# GPUs, a percentage 0-100, or one of these words.
SIMULATED_UTIL_ENV = "GPUPOOL_SIMULATED_UTIL"
SIMULATED_UTIL_WORDS = {"busy": 100.0, "idle": 0.0}
DEFAULT_SIMULATED_UTIL = 100.0  # a job that says nothing is busy
# GPUPOOL_SIMULATED_MEMORY: the GPU memory the simulated sampler shows a job using on each of
# its GPUs (a size: 45GiB), in place of the made-up figure; how tests and demos show a job
# sharing a GPU that uses more than it was granted.
SIMULATED_MEMORY_ENV = "GPUPOOL_SIMULATED_MEMORY"


def simulated_util(env: Mapping[str, str]) -> float:
    """The utilization a job declares for the simulated sampler (see SIMULATED_UTIL_ENV);
    ValueError naming the variable when it is neither a word nor a number in 0-100."""
    raw = env.get(SIMULATED_UTIL_ENV)
    if raw is None:
        return DEFAULT_SIMULATED_UTIL
    text = raw.strip().lower()
    if text in SIMULATED_UTIL_WORDS:
        return SIMULATED_UTIL_WORDS[text]
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 100.0:
        words = ", ".join(sorted(SIMULATED_UTIL_WORDS))
        raise ValueError(f"{SIMULATED_UTIL_ENV}={raw!r}: a percentage 0-100, or {words}")
    return value


def simulated_memory(env: Mapping[str, str]) -> int | None:
    """The GPU memory a job declares for the simulated sampler (SIMULATED_MEMORY_ENV), None
    when it declares none; ValueError naming the variable when it is not a size."""
    from gpupool.core.units import parse_size

    raw = env.get(SIMULATED_MEMORY_ENV)
    if raw is None:
        return None
    try:
        return parse_size(raw)
    except ValueError as exc:
        raise ValueError(f"{SIMULATED_MEMORY_ENV}={raw!r}: {exc}") from None


@dataclass(frozen=True)
class GpuProcess:
    """A process using a GPU. `job_id` None: not a gpupool job's (foreign)."""

    pid: int
    used_memory_bytes: int | None  # None: the driver does not say
    job_id: int | None


@dataclass(frozen=True)
class GpuSample:
    node: str
    index: int
    time: float  # when it was taken (the pool's clock)
    utilization_pct: float | None  # of the last sample period, 0-100
    memory_used_bytes: int | None
    memory_total_bytes: int
    power_w: float | None
    temperature_c: float | None
    processes: tuple[GpuProcess, ...]
    simulated: bool  # made up from what jobs declare, not read from a GPU

    @property
    def foreign_memory_bytes(self) -> int:
        """GPU memory held by processes that are not gpupool jobs' (counted as occupied
        when fractional jobs are placed)."""
        return sum(p.used_memory_bytes or 0 for p in self.processes if p.job_id is None)

    def jobs(self) -> frozenset[int]:
        return frozenset(p.job_id for p in self.processes if p.job_id is not None)


class Sampler(Protocol):
    """Takes one sample of every GPU of its node."""

    simulated: bool

    def sample(self, now: float) -> tuple[GpuSample, ...]: ...

    def close(self) -> None: ...
