"""What samples say about jobs (core/gpu_usage.py): each job charged for the GPUs it holds by
its share of them; the running totals and their p95; one mean per period."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from gpupool.core.gpu_usage import (
    BIN_WIDTH,
    UTIL_BINS,
    Holder,
    JobUsage,
    attribute,
    bin_of,
    percentile_of_bins,
    roll_up,
)
from gpupool.core.job import Resources
from gpupool.core.monitoring import GpuProcess, GpuSample

GIB = 1 << 30


def gpu(index: int, util: float | None, used: int | None = 0, power: float | None = 200.0,
        procs: tuple[GpuProcess, ...] = (), t: float = 100.0) -> GpuSample:  # fmt: skip
    return GpuSample("n", index, t, util, used, 80 * GIB, power, 50.0, procs, False)


def test_a_whole_gpu_job_is_charged_its_gpus_utilization_power_and_memory() -> None:
    samples = [gpu(0, 100.0, 30 * GIB), gpu(1, 50.0, 10 * GIB), gpu(2, 90.0)]
    (d,) = attribute(samples, [Holder(7, "n", (0, 1), Resources(gpus=2))], dt_s=10.0)
    assert (d.job_id, d.util_pct) == (7, 75.0)
    assert d.used_gpu_s == 1.0 * 10 + 0.5 * 10
    assert d.sampled_gpu_s == 20.0
    assert d.energy_j == 2 * 200.0 * 10
    assert d.memory_bytes == 30 * GIB  # the most on one of its GPUs
    assert not d.simulated


def test_a_shared_gpu_job_is_charged_its_share_and_its_own_processes_memory() -> None:
    procs = (GpuProcess(11, 12 * GIB, 8), GpuProcess(12, 20 * GIB, 9), GpuProcess(13, GIB, None))
    samples = [gpu(0, 80.0, 33 * GIB, procs=procs)]
    half = Holder(8, "n", (0,), Resources(gpus=1, gpu_memory_bytes=40 * GIB), 40 * GIB)
    quarter = Holder(9, "n", (0,), Resources(gpus=1, gpu_fraction=0.25), 20 * GIB)
    d8, d9 = attribute(samples, [half, quarter], dt_s=5.0)
    assert (d8.used_gpu_s, d8.sampled_gpu_s, d8.energy_j) == (0.5 * 0.8 * 5, 2.5, 0.5 * 200 * 5)
    assert (d9.used_gpu_s, d9.sampled_gpu_s) == (0.25 * 0.8 * 5, 1.25)
    assert (d8.memory_bytes, d9.memory_bytes) == (12 * GIB, 20 * GIB)


def test_gpus_that_report_nothing_charge_nothing_and_unsampled_jobs_are_skipped() -> None:
    samples = [gpu(0, None, None, None), gpu(1, 40.0, None, None)]
    holders = [
        Holder(1, "n", (0, 1), Resources(gpus=2)),
        Holder(2, "other", (0,), Resources(gpus=1)),
    ]
    (d,) = attribute(samples, holders, dt_s=10.0)
    assert (d.job_id, d.util_pct, d.used_gpu_s, d.sampled_gpu_s, d.energy_j) == (
        1, 40.0, 4.0, 10.0, 0.0
    )  # fmt: skip
    assert attribute([], holders, 10.0) == []


def test_totals_add_rounds_and_give_mean_p95_and_peak() -> None:
    usage = JobUsage()
    for util in [10.0] * 90 + [90.0] * 10:
        (d,) = attribute(
            [gpu(0, util, int(util) * GIB)], [Holder(1, "n", (0,), Resources(gpus=1))], 1.0
        )
        usage.add(d)
    s = usage.summary()
    assert s.samples == 100 and math.isclose(s.mean_util_pct or 0, 18.0)
    assert 90.0 <= (s.p95_util_pct or 0) <= 90.0 + BIN_WIDTH and s.p95_util_pct <= 90.0
    assert s.peak_memory_bytes == 90 * GIB
    assert math.isclose(s.efficiency or 0, 0.18)
    assert JobUsage().summary().p95_util_pct is None


@given(st.lists(st.floats(0, 100), min_size=1, max_size=300), st.floats(0.01, 1.0))
def test_the_quantile_of_the_bins_is_within_a_bin_of_the_exact_one(values, q) -> None:
    bins = [0] * UTIL_BINS
    for v in values:
        bins[bin_of(v)] += 1
    got = percentile_of_bins(bins, q)
    ordered = sorted(values)
    exact = ordered[max(0, math.ceil(q * len(ordered)) - 1)]  # the nearest-rank quantile
    assert got is not None and abs(got - exact) <= BIN_WIDTH + 1e-9


@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0, 10)), min_size=1, max_size=50))
def test_used_never_exceeds_sampled_and_both_add_up(rounds) -> None:
    usage = JobUsage()
    holder = Holder(1, "n", (0, 1), Resources(gpus=2))
    for util, dt in rounds:
        for d in attribute([gpu(0, util), gpu(1, 100 - util)], [holder], dt):
            usage.add(d)
    assert usage.used_gpu_s <= usage.sampled_gpu_s + 1e-6
    assert math.isclose(usage.sampled_gpu_s, sum(2 * dt for _, dt in rounds), abs_tol=1e-6)


def test_roll_up_gives_one_row_per_gpu_and_period() -> None:
    samples = [gpu(0, u, t=t) for t, u in [(0, 10.0), (30, 30.0), (60, 50.0)]] + [
        gpu(1, None, None, None, t=10)
    ]
    rows = roll_up(samples, 60)
    assert [(r.time, r.index, r.samples, r.util_pct, r.util_max_pct) for r in rows] == [
        (0, 0, 2, 20.0, 30.0), (0, 1, 1, None, None), (60, 0, 1, 50.0, 50.0)
    ]  # fmt: skip
    assert rows[1].power_w is None and rows[0].power_w == 200.0


def test_a_job_that_got_its_gpus_during_the_round_is_charged_from_then_on() -> None:
    late = Holder(1, "n", (0,), Resources(gpus=1), since=97.0)  # the round stands for 90-100
    before = Holder(2, "n", (1,), Resources(gpus=1), since=10.0)
    d1, d2 = attribute([gpu(0, 50.0), gpu(1, 50.0)], [late, before], dt_s=10.0)
    assert (d1.sampled_gpu_s, d1.used_gpu_s) == (3.0, 1.5)
    assert d2.sampled_gpu_s == 10.0
