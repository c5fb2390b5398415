"""`gpupool server --mps`: the local executor's fractional runs (`--gpus 0.5`,
`--gpu-memory`) share their GPU through NVIDIA MPS (mps.py, docs/mps.md), each pinned to its
granted memory and its share of the GPU's threads: memory past the grant then fails inside
the job, instead of the pool stopping it after its watch (monitor/idle.py).

A GPU's MPS control daemon starts with its first sharer and stops after its last; a
restarted pool counts its running sharers again from their launch.json (`readopt`), and
mps.py takes over a control daemon still running.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from gpupool.core.execution import Allocation
from gpupool.core.hardware import Gpu
from gpupool.core.paths import DIR_MODE
from gpupool.executor.files import append_private, read_json
from gpupool.executor.mps import MpsControl, sharer_env

PIPE_VARIABLE = "CUDA_MPS_PIPE_DIRECTORY"
_GPU_OF_PIPE = re.compile(r"/mps/gpu-(\d+)/pipe$")  # mps.MpsPaths' layout


class MpsSharing:
    def __init__(self, control: MpsControl, gpus: Mapping[int, Gpu]) -> None:
        self.control = control
        self.gpus = dict(gpus)

    def env_for(self, job_id: int, allocation: Allocation) -> tuple[dict[str, str], str | None]:
        """The variables a run on `allocation` gets to be its GPU's MPS client ({} for a run
        holding whole GPUs), or ({}, why) when MPS could not be had: it runs without."""
        granted = allocation.gpu_memory_bytes
        if granted is None or len(allocation.gpus) != 1:
            return {}, None
        gpu = self.gpus.get(allocation.gpus[0])
        if gpu is None or gpu.memory_bytes <= 0:
            return {}, f"GPU {allocation.gpus[0]} is not in the inventory"
        problem = self.control.acquire(gpu.index, job_id, gpu.uuid or None)
        if problem is not None:
            return {}, problem
        fraction = min(1.0, max(granted, 1) / gpu.memory_bytes)
        paths = self.control.paths(gpu.index)
        return sharer_env(paths, granted, fraction, gpu_uuid=gpu.uuid or None), None

    def launch_env(self, job_id: int, allocation: Allocation, jobdir: Path) -> dict[str, str]:
        """`env_for`, with a line in the job's log when it runs without MPS."""
        shared, problem = self.env_for(job_id, allocation)
        if problem is not None:
            jobdir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            line = f"gpupool: running without NVIDIA MPS: {problem}\n"
            append_private(jobdir / "output.log", line.encode())
        return shared

    def release(self, job_id: int) -> str | None:
        return self.control.release(job_id)

    def readopt(self, job_id: int, jobdir: Path) -> None:
        """A running run found after a restart: counted again as its GPU's sharer when its
        environment (launch.json) names an MPS pipe of ours."""
        env = (read_json(jobdir / "launch.json") or {}).get("env") or {}
        found = _GPU_OF_PIPE.search(str(env.get(PIPE_VARIABLE) or ""))
        if found is not None:
            index = int(found.group(1))
            gpu = self.gpus.get(index)
            self.control.acquire(index, job_id, None if gpu is None else gpu.uuid or None)
