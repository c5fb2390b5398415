"""A job's CPU time and memory in the store (core/cgroup_usage.py, migration 0012), on SQLite
and PostgreSQL: the last ended run's figures kept with the job, every run's CPU time summed,
and nothing made up for a run nothing counted."""

from __future__ import annotations

from test_store import spec, start, store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.core.cgroup_usage import CgroupUsage
from gpupool.core.job import JobState
from gpupool.store import Store

MIB = 1 << 20


def ran(cpu_s: float, peak_mib: int, mean_mib: int, limit_mib: int | None = 200) -> CgroupUsage:
    """One run's figures as the engine hands them over (its own CPU time in both)."""
    limit = None if limit_mib is None else limit_mib * MIB
    return CgroupUsage(cpu_s, peak_mib * MIB, mean_mib * MIB, limit, cpu_seconds_all_runs=cpu_s)


def test_a_finished_runs_figures_are_kept_and_read_back_with_the_job(store: Store) -> None:
    job = store.submit(spec(), "alice", 1.0)
    assert store.get(job.id).cgroup_usage is None  # nothing counted before it ran
    start(store, job.id)
    store.finish(job.id, JobState.SUCCEEDED, 0, 20.0, "exited with code 0", usage=ran(1.5, 64, 12))
    got = store.get(job.id).cgroup_usage
    assert got == CgroupUsage(1.5, 64 * MIB, 12 * MIB, 200 * MIB, cpu_seconds_all_runs=1.5)
    # The same from a listing of ended jobs, and a finish repeated adds nothing.
    store.finish(job.id, JobState.SUCCEEDED, 0, 21.0, "exited with code 0", usage=ran(1.5, 64, 12))
    (listed,) = store.list_jobs(states={JobState.SUCCEEDED})
    assert listed.cgroup_usage == got


def test_every_runs_cpu_time_is_summed_and_the_last_runs_figures_shown(store: Store) -> None:
    job = store.submit(spec(), "alice", 1.0)
    start(store, job.id, now=10.0)
    store.requeue(job.id, 20.0, "preempted; requeued", usage=ran(4.0, 300, 100))
    pending = store.get(job.id).cgroup_usage
    assert pending is not None and (pending.cpu_seconds, pending.cpu_seconds_all_runs) == (4.0, 4.0)
    start(store, job.id, now=30.0)
    store.finish(job.id, JobState.FAILED, 1, 40.0, "exited with code 1", usage=ran(2.5, 80, 40))
    got = store.get(job.id).cgroup_usage
    assert got == CgroupUsage(2.5, 80 * MIB, 40 * MIB, 200 * MIB, cpu_seconds_all_runs=6.5)


def test_a_run_nothing_counted_clears_the_last_runs_figures_not_the_sum(store: Store) -> None:
    job = store.submit(spec(), "alice", 1.0)
    start(store, job.id, now=10.0)
    store.requeue(job.id, 20.0, "attempt 1 of 2 failed", retry=True, usage=ran(3.0, 50, 20))
    start(store, job.id, now=30.0)
    # Lost: its supervisor died without an exit record, so nothing says what it used.
    store.finish(job.id, JobState.FAILED, None, 40.0, "lost", "NodeFail")
    got = store.get(job.id).cgroup_usage
    assert got == CgroupUsage(None, None, None, None, cpu_seconds_all_runs=3.0)


def test_a_job_cancelled_before_it_ran_again_keeps_its_last_runs_figures(store: Store) -> None:
    job = store.submit(spec(), "alice", 1.0)
    start(store, job.id, now=10.0)
    store.requeue(job.id, 20.0, "preempted; requeued", usage=ran(1.0, 10, 5, limit_mib=None))
    store.finish(job.id, JobState.CANCELLED, None, 30.0, "cancelled before it started again")
    got = store.get(job.id).cgroup_usage
    assert got == CgroupUsage(1.0, 10 * MIB, 5 * MIB, None, cpu_seconds_all_runs=1.0)


def test_accounting_reads_every_runs_cpu_time(store: Store) -> None:
    counted, uncounted = (store.submit(spec(), "alice", 1.0) for _ in range(2))
    for job in (counted, uncounted):
        start(store, job.id, gpus=(job.id,), now=10.0)
    store.finish(counted.id, JobState.SUCCEEDED, 0, 20.0, "done", usage=ran(7.0, 1, 1))
    store.finish(uncounted.id, JobState.SUCCEEDED, 0, 20.0, "done")  # a backend's, say
    by_id = {r.job_id: r for r in store.accounting_records(0.0)}
    assert (by_id[counted.id].cpu_seconds, by_id[uncounted.id].cpu_seconds) == (7.0, None)
