"""core.job.gpu_count: the one rule for the GPUs a job holds or asks for, a fraction for a
shared GPU (used by the quota book, fair-share usage, `show`, `project list`, the API)."""

from __future__ import annotations

import pytest

from gpupool.core.job import Job, JobSpec, JobState, Resources, gpu_count

GiB = 1 << 30


@pytest.mark.parametrize(
    ("res", "held", "granted", "memory", "counts"),
    [
        (Resources(gpus=2), None, None, None, 2.0),  # asks for 2
        (Resources(gpus=2), 2, None, 80 * GiB, 2.0),  # holds 2
        (Resources(gpus=0), None, None, None, 0.0),
        (Resources(gpus=1, gpu_fraction=0.5), None, None, None, 0.5),
        (Resources(gpus=1, gpu_fraction=0.5), 1, 40 * GiB, 80 * GiB, 0.5),  # the fraction, exact
        (Resources(gpus=1, gpu_memory_bytes=20 * GiB), None, None, 80 * GiB, 0.25),
        (Resources(gpus=1, gpu_memory_bytes=20 * GiB), 1, 20 * GiB, 40 * GiB, 0.5),  # its GPU
        (Resources(gpus=1, gpu_memory_bytes=20 * GiB), 1, 20 * GiB, 16 * GiB, 1.0),  # at most 1
        (Resources(gpus=1, gpu_memory_bytes=20 * GiB), 1, 20 * GiB, None, 1.0),  # GPU unknown
        (Resources(gpus=1, gpu_memory_bytes=20 * GiB), 0, 20 * GiB, 80 * GiB, 0.0),  # holds none
    ],
)
def test_gpu_count(
    res: Resources, held: int | None, granted: int | None, memory: int | None, counts: float
) -> None:
    assert gpu_count(res, held, granted, memory) == counts


def test_a_job_counts_what_it_holds_once_placed_and_what_it_asks_before() -> None:
    spec = JobSpec(command=("x",), resources=Resources(gpus=1, gpu_memory_bytes=20 * GiB))
    pending = Job(1, spec, "u", JobState.PENDING, 0.0)
    assert pending.gpu_count(80 * GiB) == 0.25  # over the largest GPU, its own not chosen yet
    running = Job(
        1, spec, "u", JobState.RUNNING, 0.0, node="n", gpus=(0,), gpu_memory_bytes=20 * GiB
    )
    assert running.gpu_count(40 * GiB) == 0.5
