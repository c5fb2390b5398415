"""The NVML sampler (monitor/nvml_sampler.py) against a fake pynvml that answers like one."""

from __future__ import annotations

import os
import subprocess
import sys

import fixtures.fake_nvml as fake
from fixtures.fake_nvml import FakeGpu, FakeNvml
from gpupool.core.monitoring import GpuProcess
from gpupool.monitor.nvml_sampler import NvmlSampler

GIB = 2**30


def two_gpus(**second: object) -> FakeNvml:
    return FakeNvml(
        [
            FakeGpu(utilization=87, memory_used=30 * GIB, power_mw=312_500, temperature=64),
            FakeGpu(**second),  # type: ignore[arg-type]
        ]
    )


def test_each_gpu_is_sampled_with_its_utilization_memory_power_and_temperature() -> None:
    nvml = two_gpus()
    sampler = NvmlSampler.open("box", lambda: {}, nvml)
    first, second = sampler.sample(now=1000.0)
    assert (first.node, first.index, first.time, first.simulated) == ("box", 0, 1000.0, False)
    assert first.utilization_pct == 87.0 and first.memory_used_bytes == 30 * GIB
    assert first.memory_total_bytes == 81920 * 2**20
    assert first.power_w == 312.5 and first.temperature_c == 64.0
    assert second.index == 1 and second.utilization_pct == 0.0
    sampler.close()
    assert nvml.init_count == 1 and nvml.shutdown_count == 1


def test_a_process_in_a_jobs_session_is_the_jobs_and_any_other_is_foreign() -> None:
    # A real process in a session of its own, as every job's main process runs.
    job_proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                start_new_session=True)  # fmt: skip
    try:
        me = os.getpid()  # not in that session: foreign
        nvml = two_gpus(compute_processes=[(job_proc.pid, 2 * GIB), (me, 512 * 2**20)])
        sampler = NvmlSampler.open("box", lambda: {job_proc.pid: 42}, nvml)
        _, second = sampler.sample(now=1.0)
        assert sorted(second.processes, key=lambda p: p.pid) == sorted(
            [GpuProcess(job_proc.pid, 2 * GIB, 42), GpuProcess(me, 512 * 2**20, None)],
            key=lambda p: p.pid,
        )
        assert second.jobs() == {42}
        assert second.foreign_memory_bytes == 512 * 2**20
    finally:
        job_proc.kill()
        job_proc.wait()


def test_a_process_that_is_compute_and_graphics_is_listed_once() -> None:
    nvml = two_gpus(compute_processes=[(4242, None)], graphics_processes=[(4242, 64 * 2**20)])
    (_, second) = NvmlSampler.open("box", lambda: {}, nvml).sample(now=1.0)
    assert second.processes == (GpuProcess(4242, 64 * 2**20, None),)


def test_memory_the_driver_cannot_tell_is_unknown_not_zero() -> None:
    not_available = 2**64 - 1  # NVML_VALUE_NOT_AVAILABLE as some pynvml versions pass it on
    nvml = two_gpus(compute_processes=[(7, None), (8, not_available)])
    (_, second) = NvmlSampler.open("box", lambda: {}, nvml).sample(now=1.0)
    assert [p.used_memory_bytes for p in second.processes] == [None, None]
    assert second.foreign_memory_bytes == 0


def test_what_a_gpu_does_not_report_is_none_and_the_rest_is_still_sampled() -> None:
    nvml = FakeNvml(
        [FakeGpu(utilization=50, temperature=40)],
        unsupported={"nvmlDeviceGetPowerUsage"},
        errors={"nvmlDeviceGetUtilizationRates": fake.NVMLError_GpuIsLost()},
        hidden={"nvmlDeviceGetGraphicsRunningProcesses"},  # an older pynvml
    )
    (only,) = NvmlSampler.open("box", lambda: {}, nvml).sample(now=1.0)
    assert only.power_w is None and only.utilization_pct is None
    assert only.temperature_c == 40.0 and only.processes == ()


def test_the_job_sessions_are_asked_for_once_per_sample() -> None:
    asked: list[int] = []

    def sessions() -> dict[int, int]:
        asked.append(1)
        return {}

    nvml = FakeNvml([FakeGpu(), FakeGpu(), FakeGpu()])
    NvmlSampler.open("box", sessions, nvml).sample(now=1.0)
    assert asked == [1]
