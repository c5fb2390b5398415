"""The machine a benchmark ran on, read without importing torch where torch is not needed.

`host_machine()` is what a CPU-only benchmark (storage) reports; `torch_machine(device)` adds
torch's view of the GPUs (model, count, CUDA version) for the benchmarks that import torch
anyway. The driver version is NVML's, else read from /proc/driver/nvidia/version when the
NVIDIA kernel module is loaded (no root needed)."""

from __future__ import annotations

import importlib
import platform
import re
import socket
from pathlib import Path

from gpupool.hwbench.result import Machine

_PROC_CPUINFO = Path("/proc/cpuinfo")
_PROC_NVIDIA = Path("/proc/driver/nvidia/version")


def cpu_model() -> str | None:
    try:
        text = _PROC_CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or None
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else (platform.processor() or None)


def nvidia_driver() -> str | None:
    """The driver's version: NVML's (nvidia-ml-py) when it answers, else the kernel
    module's version line ('550.54.15'); None without either."""
    try:
        # import_module: pynvml ships no types (inventory/nvml.py does the same)
        pynvml = importlib.import_module("pynvml")
        pynvml.nvmlInit()
        try:
            found = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return found.decode() if isinstance(found, bytes) else str(found)
    except Exception:  # no library, no driver: try the kernel module's line
        pass
    try:
        text = _PROC_NVIDIA.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]+)", text)
    return match.group(1) if match else None


def host_machine() -> Machine:
    return Machine(
        hostname=socket.gethostname(),
        device="cpu",
        driver=nvidia_driver(),
        cpu_model=cpu_model(),
    )


def torch_machine(device: str) -> Machine:
    """`device` is "cuda" or "cpu" (what the run used); torch is imported here (the caller
    already runs it)."""
    import torch

    cuda = device == "cuda"
    count = int(torch.cuda.device_count()) if cuda else 0
    return Machine(
        hostname=socket.gethostname(),
        device=device,
        gpu_model=str(torch.cuda.get_device_name(0)) if count else None,
        gpu_count=count,
        driver=nvidia_driver(),
        cuda=torch.version.cuda if cuda else None,
        torch=str(torch.__version__),
        cpu_model=cpu_model(),
    )
