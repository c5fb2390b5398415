"""A job's CPU time and memory from its runs' cgroups (core/cgroup_usage.py) on its way out:
the engine hands a run's figures to the store with its finish or requeue, accounting charges
CPU-hours by window, the API carries them (a running job's read live), `show`, `usage` and
`/metrics` render them, and a figure nothing counted is never shown."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_engine_react import engine_state, record, running
from test_metrics import Pool, pool  # noqa: F401  (fixture)

from gpupool.api.wire import job_to_wire
from gpupool.cli.cpu_memory import cpu_memory_text
from gpupool.cli.usage import _cells
from gpupool.client.usage_views import GroupUsageView
from gpupool.client.views import CgroupUsageView, read_job
from gpupool.core.cgroup_usage import CgroupUsage, ended_run_usage, live_usage
from gpupool.core.execution import (
    ExitReason,
    ExitRecord,
    Handle,
    Observation,
    RunState,
    RunUsage,
)
from gpupool.core.job import Job, JobSpec, JobState, Resources
from gpupool.core.values import replaced
from gpupool.engine.events import Finish, Polled, Release, Released, Requeue, RequeueRefused
from gpupool.engine.react import react
from gpupool.service.accounting import GroupBy, cpu_hours_in_window, usage_report
from gpupool.service.live_usage import live_cgroup_usage, with_live_usage
from gpupool.store.accounting import JobRecord, Run

MIB = 1 << 20
H = 3600.0
NOW = 1000.0


def counted(record_: ExitRecord, cpu_s: float = 1.25, peak: int = 64 * MIB) -> ExitRecord:
    """`record_` as a run in a cgroup ends: with what it used and the limit it ran under."""
    usage = RunUsage(cpu_s, peak, 12 * MIB)
    return replace(record_, usage=usage, memory_limit_bytes=64 * MIB)


# -- the engine: a run's figures go to the store with its end -------------------------------


def test_a_finished_runs_figures_go_with_its_finish() -> None:
    state = engine_state(running(1))
    (finish,) = react(state, Polled({1: Observation(RunState.EXITED, counted(record()))}, NOW))
    assert isinstance(finish, Finish)
    assert finish.usage == CgroupUsage(1.25, 64 * MIB, 12 * MIB, 64 * MIB, 1.25)


def test_a_preempted_runs_figures_go_with_its_requeue_after_the_release() -> None:
    state = engine_state(running(1))
    preempted = counted(record(143, ExitReason.PREEMPTED), cpu_s=9.0)
    assert react(state, Polled({1: Observation(RunState.EXITED, preempted)}, NOW)) == [
        Release(Handle(1, 0), NOW)
    ]
    (requeue,) = react(state, Released(1, True, NOW))
    assert isinstance(requeue, Requeue)
    assert requeue.usage is not None and requeue.usage.cpu_seconds == 9.0


def test_a_run_cancelled_while_preempted_finishes_with_its_figures() -> None:
    state = engine_state(running(1))
    preempted = counted(record(143, ExitReason.PREEMPTED), cpu_s=3.0)
    react(state, Polled({1: Observation(RunState.EXITED, preempted)}, NOW))
    (finish,) = react(state, RequeueRefused(1, NOW))  # a cancel came first: it ends there
    assert isinstance(finish, Finish) and finish.state is JobState.CANCELLED
    assert finish.usage is not None and finish.usage.cpu_seconds == 3.0


def test_a_backends_run_hands_over_no_figures() -> None:
    state = engine_state(running(1))
    (finish,) = react(state, Polled({1: Observation(RunState.EXITED, record())}, NOW))
    assert isinstance(finish, Finish) and finish.usage is None
    assert ended_run_usage(record()) is None


# -- accounting: CPU-hours by window ---------------------------------------------------------


def job_record(job_id: int, user: str, runs: tuple[Run, ...], cpu_s: float | None) -> JobRecord:
    return JobRecord(job_id, user, "p", "a", (0,), 1.0, None, 0.0, JobState.SUCCEEDED, runs, cpu_s)


def test_cpu_time_is_spread_over_the_runs_and_clipped_to_the_window() -> None:
    # Two ended runs of 1 h each (7200 CPU-s in all); the window holds the second and half of
    # the first: three quarters of the CPU time.
    runs = (Run(0.0, H, True), Run(2 * H, 3 * H, False))
    rec = job_record(1, "alice", runs, 7200.0)
    assert cpu_hours_in_window(rec, H / 2, 4 * H) == pytest.approx(1.5)
    assert cpu_hours_in_window(replace(rec, cpu_seconds=None), 0.0, 4 * H) is None
    # A run over at once is charged whole in the window it ended in.
    instant = job_record(2, "bob", (Run(H, H, False),), 36.0)
    assert cpu_hours_in_window(instant, 0.0, 2 * H) == pytest.approx(0.01)
    assert cpu_hours_in_window(instant, 2 * H, 3 * H) == 0.0


def test_a_group_none_of_whose_jobs_was_counted_has_no_cpu_hours() -> None:
    recs = [
        job_record(1, "alice", (Run(0.0, H, False),), 1800.0),
        job_record(2, "alice", (Run(0.0, H, False),), None),
        job_record(3, "bob", (Run(0.0, H, False),), None),  # a backend's
    ]
    report = usage_report(recs, [], GroupBy.USER, 0.0, 2 * H, lambda r: "x")
    by_user = {row.group: row for row in report.rows}
    assert by_user["alice"].cpu_h == pytest.approx(0.5)
    assert by_user["bob"].cpu_h is None
    assert report.total.cpu_h == pytest.approx(0.5)


def test_usage_shows_cpu_hours_next_to_gpu_hours_and_a_dash_when_unknown() -> None:
    row = GroupUsageView("alice", 2, 4.0, 3.0, 4.0, 0.75, 60.0, 0.0, 0.0, 1.0, 0.5)
    cells = _cells(row)
    assert cells[2:5] == ("4.00", "3.00", "0.50")  # ALLOC GPU-H, USED GPU-H, CPU-H
    assert _cells(replaced(row, cpu_hours=None))[4] == "-"


# -- the API's job and the client's view of it ----------------------------------------------


def a_job(state: JobState = JobState.SUCCEEDED, usage: CgroupUsage | None = None) -> Job:
    spec = JobSpec(command=("train",), resources=Resources(mem_bytes=200 * MIB))
    return Job(7, spec, "alice", state, 1.0, start_time=2.0, cgroup_usage=usage)


def test_the_job_answer_carries_the_figures_and_the_client_reads_them() -> None:
    usage = CgroupUsage(1.5, 64 * MIB, 12 * MIB, 200 * MIB, cpu_seconds_all_runs=3.5)
    answer = job_to_wire(a_job(usage=usage), private=False)  # figures are not private
    assert answer["cgroup_usage"] == {
        "cpu_seconds": 1.5,
        "cpu_seconds_all_runs": 3.5,
        "memory_peak_bytes": 64 * MIB,
        "memory_mean_bytes": 12 * MIB,
        "memory_current_bytes": None,
        "memory_limit_bytes": 200 * MIB,
        "live": False,
    }
    view = read_job(dict(answer))
    assert view.cgroup_usage == CgroupUsageView(
        1.5, 3.5, 64 * MIB, 12 * MIB, None, 200 * MIB, False
    )
    older = {k: v for k, v in job_to_wire(a_job()).items() if k != "cgroup_usage"}
    assert read_job(older).cgroup_usage is None  # an older daemon's answer


class CountingExecutor:
    """An executor whose runs' cgroups say `run` (None: it has none)."""

    def __init__(self, run: RunUsage | None) -> None:
        self.run = run
        self.asked: list[Handle] = []

    def run_usage(self, handle: Handle) -> RunUsage | None:
        self.asked.append(handle)
        return self.run


def test_a_running_job_is_shown_with_its_runs_figures_read_now() -> None:
    earlier = CgroupUsage(4.0, 300 * MIB, 100 * MIB, 200 * MIB, cpu_seconds_all_runs=4.0)
    job = replace(a_job(JobState.RUNNING, earlier), restart_count=1)
    executor = CountingExecutor(RunUsage(2.0, 50 * MIB, None, memory_current_bytes=30 * MIB))
    shown = with_live_usage(executor, job).cgroup_usage
    assert shown == CgroupUsage(2.0, 50 * MIB, None, 200 * MIB, 6.0, 30 * MIB, live=True)
    assert executor.asked == [Handle(7, 1)]  # its current run
    # Nothing read for a job not running, a backend's job, or an executor that counts nothing.
    assert with_live_usage(executor, a_job(usage=earlier)).cgroup_usage == earlier
    backend_job = replace(job, spec=replace(job.spec, backend="slurm"))
    assert live_cgroup_usage(executor, backend_job) is None
    assert live_cgroup_usage(object(), job) is None
    assert with_live_usage(CountingExecutor(None), job) is job


# -- `show`'s words ---------------------------------------------------------------------------


def view_of(usage: CgroupUsage) -> CgroupUsageView:
    answer = job_to_wire(a_job(usage=usage))
    view = read_job(dict(answer)).cgroup_usage
    assert view is not None
    return view


def test_show_says_cpu_time_and_memory_peak_mean_and_limit() -> None:
    ended = view_of(CgroupUsage(1.2, 64 * MIB, 12 * MIB, 64 * MIB, cpu_seconds_all_runs=1.2))
    words = "1.2 CPU-s; memory peak 64MiB, mean 12MiB (limit 64MiB)"
    assert cpu_memory_text(ended, ended=True) == words
    # Requeued and waiting: its last run's figures, said to be so.
    assert cpu_memory_text(ended, ended=False) == f"last run: {words}"


def test_show_says_a_running_jobs_figures_so_far_and_all_its_runs() -> None:
    live = live_usage(
        RunUsage(5400.0, 41 * MIB, None, memory_current_bytes=30 * MIB),
        CgroupUsage(3600.0, 1, 1, None, cpu_seconds_all_runs=3600.0),  # its run before
        None,
    )
    assert cpu_memory_text(view_of(live), ended=False) == (
        "1.50 CPU-h so far (2.50 CPU-h over all its runs); memory now 30MiB, peak 41MiB"
    )


def test_show_leaves_out_what_nothing_counted() -> None:
    assert cpu_memory_text(None, ended=True) is None
    cpu_only = view_of(CgroupUsage(0.5, None, None, None, cpu_seconds_all_runs=0.5))
    assert cpu_memory_text(cpu_only, ended=True) == "0.5 CPU-s"
    nothing = view_of(CgroupUsage(None, None, None, 64 * MIB, cpu_seconds_all_runs=3.0))
    assert cpu_memory_text(nothing, ended=True) is None


# -- /metrics -------------------------------------------------------------------------------


def test_metrics_export_each_running_jobs_cpu_time_and_memory(
    pool: Pool,  # noqa: F811  (the fixture)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counted_job = pool.submit(user="bob", name="train-a", resources=Resources(mem_bytes=200 * MIB))
    uncounted = pool.submit(name="elsewhere")
    pool.start(counted_job, (0,))
    pool.start(uncounted, (1,))

    def run_usage(handle: Handle) -> RunUsage | None:
        if handle.job_id != counted_job:
            return None  # no cgroup: nothing exported for it, rather than zeros
        return RunUsage(12.5, 80 * MIB, None, memory_current_bytes=60 * MIB)

    monkeypatch.setattr(pool.executor, "run_usage", run_usage)
    got = pool.scrape()
    labels = (("job_id", str(counted_job)), ("name", "train-a"), ("project", "default"))
    labels += (("user", "bob"),)
    assert got["gpupool_job_cpu_seconds_total"] == {labels: 12.5}
    assert got["gpupool_job_memory_bytes"] == {labels: 60 * MIB}
    assert got["gpupool_job_memory_peak_bytes"] == {labels: 80 * MIB}
    assert got["gpupool_job_memory_limit_bytes"] == {labels: 200 * MIB}
