"""What GPU sampling costs the daemon: CPU time per sample of 8 GPUs, as a share of one core
at 1 Hz (issue 14's target: under 1%).

The NVML sampler (monitor/nvml_sampler.py) runs against the fake pynvml of the tests
(tests/fixtures/fake_nvml.py, answering like pynvml) on 8 GPUs with `--procs` processes
each, real processes of this machine in sessions of their own, so attribution reads /proc as
it does in the daemon; with `--real` against the machine's pynvml instead (a GPU machine).
Baseline in the same run: the same NVML calls made directly, without gpupool's sampler
(what NVML itself costs here). The simulated sampler of a declared inventory is measured
too. Prints one JSON object: per sampler, cpu_ms_per_sample (median of `--samples`) and
core_share_at_1hz. Usage: python bench/monitor_overhead.py [--samples 200] [--procs 2] [--real]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

from gpupool.core.hardware import Gpu, Node  # noqa: E402
from gpupool.monitor.nvml_sampler import NVML_TEMPERATURE_GPU, NvmlSampler  # noqa: E402
from gpupool.monitor.simulated import JobOnGpus, SimulatedSampler  # noqa: E402

GPUS = 8
GIB = 2**30


def cpu_ms(fn: Callable[[], object], samples: int) -> float:
    """Median CPU time of one call of `fn`, in ms (this thread's CPU, not wall time)."""
    took = []
    for _ in range(samples):
        began = time.thread_time()
        fn()
        took.append((time.thread_time() - began) * 1000)
    return statistics.median(took)


def raw_nvml(nvml: Any) -> Callable[[], object]:
    """The NVML calls a sample makes, made directly: the baseline."""
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]

    def read() -> object:
        return [
            (
                nvml.nvmlDeviceGetUtilizationRates(h),
                nvml.nvmlDeviceGetMemoryInfo(h),
                nvml.nvmlDeviceGetPowerUsage(h),
                nvml.nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU),
                nvml.nvmlDeviceGetComputeRunningProcesses(h),
                nvml.nvmlDeviceGetGraphicsRunningProcesses(h),
            )
            for h in handles
        ]

    return read


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--procs", type=int, default=2, help="processes per GPU (fake NVML)")
    ap.add_argument("--real", action="store_true", help="this machine's pynvml")
    args = ap.parse_args()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
        )  # fmt: skip
        for _ in range(GPUS * args.procs)
    ]
    try:
        sessions = {p.pid: n for n, p in enumerate(procs[::2], start=1)}  # half are jobs'
        if args.real:
            import pynvml

            nvml: Any = pynvml
        else:
            from fixtures.fake_nvml import FakeGpu, FakeNvml

            nvml = FakeNvml(
                [
                    FakeGpu(
                        utilization=60,
                        memory_used=20 * GIB,
                        compute_processes=[
                            (p.pid, GIB) for p in procs[g * args.procs : (g + 1) * args.procs]
                        ],
                    )
                    for g in range(GPUS)
                ]
            )
        sampler = NvmlSampler.open(os.uname().nodename, lambda: sessions, nvml)
        gpus = sampler.sample(time.time())
        baseline = cpu_ms(raw_nvml(nvml), args.samples)
        nvml_ms = cpu_ms(lambda: sampler.sample(time.time()), args.samples)
        sampler.close()
        node = Node("box", tuple(Gpu(i, "A100-80GB", 80 * GIB) for i in range(GPUS)))
        running = [JobOnGpus(n, "box", (n % GPUS,), 50.0, pid=p.pid) for n, p in enumerate(procs)]
        simulated = SimulatedSampler([node], lambda: running)
        simulated_ms = cpu_ms(lambda: simulated.sample(time.time()), args.samples)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    print(
        json.dumps(
            {
                "machine": {"cpus": os.cpu_count(), "load_average": os.getloadavg()},
                "nvml": "pynvml (real)" if args.real else "tests/fixtures/fake_nvml.py",
                "gpus": len(gpus),
                "processes_per_gpu": args.procs,
                "samples": args.samples,
                "target_core_share_at_1hz": 0.01,
                "gpupool_nvml_sampler": _result(nvml_ms),
                "baseline_raw_nvml_calls": _result(baseline),
                "simulated_sampler": _result(simulated_ms),
            },
            indent=2,
        )
    )


def _result(ms: float) -> dict[str, float]:
    return {"cpu_ms_per_sample": round(ms, 3), "core_share_at_1hz": round(ms / 1000.0, 5)}


if __name__ == "__main__":
    main()
