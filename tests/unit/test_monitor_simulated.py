"""The simulated sampler of a declared inventory (monitor/simulated.py) and what jobs
declare to it (core.monitoring.simulated_util)."""

from __future__ import annotations

import pytest

from gpupool.core.hardware import Gpu, Node
from gpupool.core.monitoring import GpuProcess, simulated_util
from gpupool.monitor.simulated import JobOnGpus, SimulatedSampler

GIB = 2**30


def node(n: int = 4) -> Node:
    return Node("box", tuple(Gpu(i, "A100-80GB", 80 * GIB) for i in range(n)))


def test_every_sample_says_it_is_simulated_and_an_idle_gpu_shows_nothing() -> None:
    samples = SimulatedSampler([node()], lambda: []).sample(now=5.0)
    assert [s.index for s in samples] == [0, 1, 2, 3]
    assert all(s.simulated for s in samples) and SimulatedSampler.simulated
    assert all(s.utilization_pct == 0.0 and s.processes == () for s in samples)
    assert all(s.memory_used_bytes == 0 and s.memory_total_bytes == 80 * GIB for s in samples)


def test_a_job_shows_what_it_declares_on_its_gpus_only() -> None:
    running = [JobOnGpus(7, "box", (1, 2), utilization_pct=35.0, pid=900)]
    samples = SimulatedSampler([node()], lambda: running, board_power_w={("box", 1): 400.0}).sample(
        now=5.0
    )
    on = {s.index: s for s in samples}
    assert on[1].utilization_pct == on[2].utilization_pct == 35.0
    assert on[0].utilization_pct == on[3].utilization_pct == 0.0
    assert on[1].processes == (GpuProcess(900, int(80 * GIB * 0.8 * 0.35), 7),)
    assert on[1].power_w == pytest.approx(140.0) and on[2].power_w is None  # power unknown
    assert on[1].temperature_c == pytest.approx(47.5)


def test_fractional_jobs_sharing_a_gpu_add_up_to_at_most_full_use() -> None:
    running = [
        JobOnGpus(1, "box", (0,), utilization_pct=70.0, memory_bytes=20 * GIB),
        JobOnGpus(2, "box", (0,), utilization_pct=60.0, memory_bytes=40 * GIB),
    ]
    (first, *_) = SimulatedSampler([node()], lambda: running).sample(now=5.0)
    assert first.utilization_pct == 100.0
    assert first.memory_used_bytes == int(20 * GIB * 0.7) + int(40 * GIB * 0.6)
    assert first.jobs() == frozenset()  # no pids known: no processes listed


@pytest.mark.parametrize(
    ("value", "util"),
    [(None, 100.0), ("busy", 100.0), ("IDLE", 0.0), ("35", 35.0), ("12.5%", 12.5), ("0", 0.0)],
)
def test_a_job_declares_its_utilization_in_its_environment(value: str | None, util: float) -> None:
    env = {} if value is None else {"GPUPOOL_SIMULATED_UTIL": value}
    assert simulated_util(env) == util


@pytest.mark.parametrize("value", ["101", "-1", "half", "", "nan"])
def test_a_declared_utilization_that_is_not_one_is_refused_by_name(value: str) -> None:
    with pytest.raises(ValueError, match="GPUPOOL_SIMULATED_UTIL="):
        simulated_util({"GPUPOOL_SIMULATED_UTIL": value})
