"""The sampler of a declared inventory (no NVML): GPU use made up from what jobs declare.

A test machine, a demo or a laptop has no GPU to read, yet everything built on samples
(accounting, the idle policy, the dashboard, /metrics) must work there and be testable. So
each running job declares how busy it keeps its GPUs (GPUPOOL_SIMULATED_UTIL in its
environment, core.monitoring.simulated_util: busy unless it says otherwise), and this
sampler reports exactly that, every sample marked `simulated`.

Made-up figures, chosen to be explainable rather than realistic:
- utilization: the sum of what the jobs on the GPU declare, at most 100;
- memory used: a whole-GPU job uses 80% of the GPU's memory times its utilization; a
  fractional job, the memory it was granted times its utilization; a job that declares
  GPUPOOL_SIMULATED_MEMORY, that (how a demo shows a job using more than it was granted);
- power: the GPU's board power (when the caller knows it) times utilization, at least 10%
  of it (an idle GPU still draws some); temperature 30 C + 0.5 C per utilization point;
- processes: each job's main process (its pid, when known), with the memory above.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gpupool.core.hardware import Node
from gpupool.core.monitoring import GpuProcess, GpuSample

WHOLE_GPU_MEMORY_SHARE = 0.8
IDLE_POWER_SHARE = 0.1


@dataclass(frozen=True)
class JobOnGpus:
    """A running job as the simulated sampler sees it."""

    job_id: int
    node: str
    gpus: tuple[int, ...]
    utilization_pct: float  # what it declares (core.monitoring.simulated_util)
    memory_bytes: int | None = None  # granted on its GPU (fractional); None: whole GPUs
    pid: int | None = None  # its main process, shown on its GPUs
    declared_memory_bytes: int | None = None  # GPUPOOL_SIMULATED_MEMORY: used per GPU


class SimulatedSampler:
    simulated = True

    def __init__(
        self,
        nodes: Sequence[Node],
        running: Callable[[], Sequence[JobOnGpus]],
        board_power_w: Mapping[tuple[str, int], float] | None = None,
    ) -> None:
        """`running`: the jobs running on these nodes now, asked once per sample;
        `board_power_w`: each GPU's board power by (node, index), where known."""
        self.nodes = tuple(nodes)
        self._running = running
        self._power = dict(board_power_w or {})

    def close(self) -> None:
        pass

    def sample(self, now: float) -> tuple[GpuSample, ...]:
        on: dict[tuple[str, int], list[JobOnGpus]] = {
            (node.name, gpu.index): [] for node in self.nodes for gpu in node.gpus
        }
        for job in self._running():
            for index in job.gpus:
                if (job.node, index) in on:
                    on[job.node, index].append(job)
        return tuple(
            self._gpu(node.name, gpu.index, gpu.memory_bytes, on[node.name, gpu.index], now)
            for node in self.nodes
            for gpu in node.gpus
        )

    def _gpu(
        self, node: str, index: int, total: int, jobs: list[JobOnGpus], now: float
    ) -> GpuSample:
        util = min(100.0, sum(j.utilization_pct for j in jobs))
        processes = []
        used = 0
        for job in jobs:
            share = job.utilization_pct / 100.0
            granted = (
                total * WHOLE_GPU_MEMORY_SHARE if job.memory_bytes is None else job.memory_bytes
            )
            memory = int(granted * share)
            if job.declared_memory_bytes is not None:
                memory = job.declared_memory_bytes
            used += memory
            if job.pid is not None:
                processes.append(GpuProcess(job.pid, memory, job.job_id))
        board = self._power.get((node, index))
        power = None if board is None else board * max(IDLE_POWER_SHARE, util / 100.0)
        return GpuSample(
            node=node,
            index=index,
            time=now,
            utilization_pct=util,
            memory_used_bytes=min(used, total),
            memory_total_bytes=total,
            power_w=power,
            temperature_c=30.0 + 0.5 * util,
            processes=tuple(processes),
            simulated=True,
        )
