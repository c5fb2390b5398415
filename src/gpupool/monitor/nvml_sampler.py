"""The sampler of a machine with NVIDIA GPUs: NVML (pynvml), the library nvidia-smi uses.

Per GPU: utilization (of the driver's last sample period), memory used and total, power,
temperature, and the compute and graphics processes with the memory each holds, each given
to the job whose session it runs in (monitor/attribution.py) or marked foreign.

Monitoring never stops the pool: a field the GPU or driver does not report, or a call that
fails (a GPU fallen off the bus answers GpuIsLost), is None in that sample, and the next
sample asks again. NVML is started once (`open`) and shut down by `close`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from gpupool.core.monitoring import GpuProcess, GpuSample
from gpupool.monitor.attribution import job_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpupool.monitor.nvml_health import NvmlHealth

NVML_TEMPERATURE_GPU = 0  # the GPU die's sensor (pynvml.NVML_TEMPERATURE_GPU)

# Each running job's session id -> its job id, asked for once per sample.
SessionsOfJobs = Callable[[], Mapping[int, int]]


class NvmlSampler:
    simulated = False

    def __init__(self, node: str, nvml: Any, sessions: SessionsOfJobs) -> None:
        """`nvml`: the pynvml module (or a stand-in for tests), already initialized."""
        self.node = node
        self._nvml = nvml
        self._sessions = sessions
        self._handles = [
            nvml.nvmlDeviceGetHandleByIndex(i) for i in range(int(nvml.nvmlDeviceGetCount()))
        ]

    @classmethod
    def open(cls, node: str, sessions: SessionsOfJobs, nvml: Any = None) -> NvmlSampler:
        """Start NVML (pynvml unless `nvml` is given) and a sampler of this node's GPUs.
        Raises what pynvml raises when there is no driver or GPU (the daemon then uses no
        NVML sampler)."""
        if nvml is None:
            nvml = importlib.import_module("pynvml")
        nvml.nvmlInit()
        try:
            return cls(node, nvml, sessions)
        except BaseException:
            nvml.nvmlShutdown()
            raise

    def health_reader(self) -> NvmlHealth:
        """The health of the same GPUs (monitor/nvml_health.py), on the same NVML session."""
        from gpupool.monitor.nvml_health import NvmlHealth

        return NvmlHealth(self.node, self._nvml, self._handles)

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass

    def sample(self, now: float) -> tuple[GpuSample, ...]:
        sessions = self._sessions()
        return tuple(self._gpu(i, h, now, sessions) for i, h in enumerate(self._handles))

    def _gpu(self, index: int, handle: Any, now: float, sessions: Mapping[int, int]) -> GpuSample:
        nvml = self._nvml
        util = self._read(nvml.nvmlDeviceGetUtilizationRates, handle)
        memory = self._read(nvml.nvmlDeviceGetMemoryInfo, handle)
        power_mw = self._read(nvml.nvmlDeviceGetPowerUsage, handle)
        temperature = self._read(nvml.nvmlDeviceGetTemperature, handle, NVML_TEMPERATURE_GPU)
        return GpuSample(
            node=self.node,
            index=index,
            time=now,
            utilization_pct=None if util is None else float(util.gpu),
            memory_used_bytes=None if memory is None else int(memory.used),
            memory_total_bytes=0 if memory is None else int(memory.total),
            power_w=None if power_mw is None else power_mw / 1000.0,
            temperature_c=None if temperature is None else float(temperature),
            processes=self._processes(handle, sessions),
            simulated=False,
        )

    def _processes(self, handle: Any, sessions: Mapping[int, int]) -> tuple[GpuProcess, ...]:
        """Compute and graphics processes, each once (a process can be both)."""
        found: dict[int, int | None] = {}
        for call in (
            "nvmlDeviceGetComputeRunningProcesses",
            "nvmlDeviceGetGraphicsRunningProcesses",
        ):
            get = getattr(self._nvml, call, None)  # older pynvml lack the graphics call
            listed = None if get is None else self._read(get, handle)
            for proc in listed or ():
                used = getattr(proc, "usedGpuMemory", None)
                # pynvml gives None (or NVML_VALUE_NOT_AVAILABLE, ~0) when the driver cannot say
                memory = int(used) if isinstance(used, int) and 0 <= used < 2**63 else None
                pid = int(proc.pid)
                if found.get(pid) is None:
                    found[pid] = memory
        return tuple(
            GpuProcess(pid, memory, job_of(pid, sessions)) for pid, memory in sorted(found.items())
        )

    def _read(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)`, or None when NVML cannot answer it now (not supported, GPU lost...)."""
        try:
            return fn(*args)
        except self._nvml.NVMLError:
            return None
