"""The `Machine` a torch benchmark ran on, read from torch and /proc (called inside `run`).

torch is imported inside `probe`, so importing this file never imports it. The
driver version is not known to torch: it is left None here (NVML's, `gpupool topo`, has it).
"""

from __future__ import annotations

import socket
from pathlib import Path

from gpupool.hwbench.result import Machine


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The first "model name" of /proc/cpuinfo; None where there is none (not Linux, ARM)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "model name":
            return value.strip() or None
    return None


def probe(device: str) -> Machine:
    """This machine as seen by torch; `device` is "cuda" or "cpu" (what the run used)."""
    import torch

    cuda = device == "cuda"
    count = int(torch.cuda.device_count()) if cuda else 0
    return Machine(
        hostname=socket.gethostname(),
        device=device,
        gpu_model=str(torch.cuda.get_device_name(0)) if count else None,
        gpu_count=count,
        driver=None,
        cuda=torch.version.cuda if cuda else None,
        torch=str(torch.__version__),
        cpu_model=cpu_model(),
    )
