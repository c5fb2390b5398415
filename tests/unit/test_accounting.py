"""Accounting (service/accounting.py over store/accounting.py): per user, project or GPU type,
GPU-hours allocated in the window (every run of a requeued job), used (from the job-hour
rows), efficiency, mean wait, lost to preemption, idle reclaimed. On SQLite and PostgreSQL."""

from __future__ import annotations

import math

from test_store import spec, start, store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.core.gpu_usage import Holder, attribute
from gpupool.core.hardware import Gpu, Inventory, Node
from gpupool.core.job import JobState, Resources
from gpupool.core.monitoring import GpuSample
from gpupool.service.accounting import (
    Accounting,
    GroupBy,
    IdleStop,
    gpu_type_by_inventory,
    history_period,
    usage_report,
)
from gpupool.store import Store
from gpupool.store.accounting import JobRecord, Run

H = 3600.0
GIB = 1 << 30
T0 = 1_700_000_000.0 - (1_700_000_000.0 % H)


def record(job_id: int, user: str, runs: tuple[Run, ...], gpus: float = 2.0, submit: float = T0,
           node: str | None = "a", project: str = "p") -> JobRecord:  # fmt: skip
    return JobRecord(job_id, user, project, node, (0,), gpus, None, submit, JobState.RUNNING, runs)


def test_runs_are_clipped_to_the_window_and_preempted_runs_counted_as_lost() -> None:
    recs = [
        # ran 2 h before the window and 1 h inside it, then preempted; runs again since
        record(1, "alice", (Run(T0 - 2 * H, T0 + H, True), Run(T0 + 2 * H, None, False))),
        record(2, "bob", (), gpus=1.0, submit=T0 + H),  # still waiting
    ]
    report = usage_report(recs, [], GroupBy.USER, T0, T0 + 4 * H, lambda r: "A100")
    alice, bob = report.rows
    assert (alice.group, alice.jobs) == ("alice", 1)
    assert alice.allocated_gpu_h == 2.0 * (1 + 2)
    assert alice.preempted_gpu_h == 2.0 * 1
    assert alice.mean_wait_s is None  # its first start was before the window
    assert (bob.allocated_gpu_h, bob.jobs) == (0.0, 1)
    assert report.total.jobs == 2 and report.total.allocated_gpu_h == 6.0


def test_mean_wait_counts_jobs_first_started_in_the_window() -> None:
    recs = [
        record(1, "a", (Run(T0 + 100, T0 + 200, False),), submit=T0),
        record(2, "a", (Run(T0 + 400, None, False),), submit=T0 + 100),
    ]
    (row,) = usage_report(recs, [], GroupBy.PROJECT, T0, T0 + H, lambda r: "x").rows
    assert row.group == "p" and row.mean_wait_s == (100 + 300) / 2


def test_idle_reclaimed_counts_from_the_stop_to_the_time_limit_within_the_window() -> None:
    recs = [record(1, "a", (Run(T0, T0 + H, False),))]
    stops = [IdleStop(1, T0 + H, T0 + 10 * H)]
    (row,) = usage_report(recs, [], GroupBy.USER, T0, T0 + 3 * H, lambda r: "x", stops).rows
    assert row.idle_reclaimed_gpu_h == 2.0 * 2


def test_the_gpu_type_is_the_model_held_else_asked_else_any() -> None:
    of = gpu_type_by_inventory({("a", 0): "H100"})
    held = record(1, "a", ())
    asked = JobRecord(2, "a", "p", None, (), 1.0, "A100-80GB", T0, JobState.PENDING, ())
    neither = JobRecord(3, "a", "p", None, (), 1.0, None, T0, JobState.PENDING, ())
    assert [of(r) for r in (held, asked, neither)] == ["H100", "A100-80GB", "any"]


def test_history_period_is_the_finest_series_within_1500_points() -> None:
    assert history_period(H, 5.0) == 0
    assert history_period(24 * H, 5.0) == 60
    assert history_period(30 * 24 * H, 5.0) == 3600
    assert history_period(H, 0.0) == 60  # sampling off: no full-rate series to read


def test_a_report_from_the_store_counts_every_run_and_what_samples_measured(store: Store) -> None:
    inventory = Inventory(
        (Node("a", tuple(Gpu(i, "H100", 80 * GIB) for i in range(4))),), "declared"
    )
    first = store.submit(spec(gpus=2), "alice", T0)
    start(store, first.id, "a", (0, 1), now=T0 + 60)
    store.requeue(first.id, T0 + H, "preempted")  # 59 minutes lost
    start(store, first.id, "a", (2, 3), now=T0 + 2 * H)
    store.finish(first.id, JobState.SUCCEEDED, 0, T0 + 3 * H, "done")
    other = store.submit(spec(gpus=1, project="default"), "bob", T0 + 10)
    start(store, other.id, "a", (0,), now=T0 + 2 * H)
    holder = Holder(other.id, "a", (0,), Resources(gpus=1))
    for i in range(6):  # half an hour at 40%, in 5-minute rounds
        t = T0 + 2 * H + 300 * i
        samples = [GpuSample("a", 0, t, 40.0, GIB, 80 * GIB, 100.0, 40.0, (), True)]
        store.record_samples(samples, attribute(samples, [holder], 300.0))
    accounting = Accounting(store, inventory, 300.0, simulated=True)
    report = accounting.report(GroupBy.USER, T0, T0 + 3 * H)
    by_user = {r.group: r for r in report.rows}
    alice, bob = by_user["alice"], by_user["bob"]
    assert math.isclose(alice.allocated_gpu_h, 2 * (59 / 60) + 2 * 1.0)
    assert math.isclose(alice.preempted_gpu_h, 2 * (59 / 60))
    assert alice.efficiency is None  # never sampled
    assert math.isclose(bob.allocated_gpu_h, 1.0)  # still running at the window's end
    assert math.isclose(bob.used_gpu_h, 0.4 * 0.5) and math.isclose(bob.sampled_gpu_h, 0.5)
    assert math.isclose(bob.efficiency or 0, 0.4)
    assert math.isclose(bob.mean_wait_s or 0, 2 * H - 10)
    assert report.simulated
    (h100,) = accounting.report(GroupBy.GPU_TYPE, T0, T0 + 3 * H).rows
    assert (h100.group, h100.jobs) == ("H100", 2)
    later = accounting.report(GroupBy.USER, T0 + 10 * H, T0 + 11 * H)
    assert [r.group for r in later.rows] == ["bob"]  # still running; alice's job ended
    assert (accounting.job_usage(other.id) or None) is not None
    assert accounting.job_usage(first.id) is None
