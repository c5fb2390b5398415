"""Fractional GPUs and EASY backfill: they never take the reservation, and one that would
outlast it keeps off the reserved GPUs (shared ones included)."""

from __future__ import annotations

from policy_builders import GiB, node
from test_fractional_placement import frac, running

from gpupool.core.job import Resources
from gpupool.policy import PendingJob, RunningJob
from gpupool.policy.backfill import FreeIndex, Release, reserve
from gpupool.policy.decide import decide
from gpupool.policy.free_view import free_view
from gpupool.policy.snapshot import Snapshot


def box(count: int = 1):
    return node("box", count)


def test_fractional_jobs_never_take_the_reservation() -> None:
    n = box(1)
    frees = free_view(Snapshot(nodes=(n,), running=(running(1, 0, frac(0.75), 60 * GiB),)))[0]
    releases = [Release(500.0, "box", (0,), frac(0.75), 60 * GiB)]
    assert reserve(9, frac(0.5), frees, releases, now=0.0) is None
    whole = reserve(9, Resources(gpus=1), frees, releases, now=0.0)
    assert whole is not None and whole.time == 500.0 and whole.reservation.gpus == (0,)


def test_reservation_sees_a_shared_gpu_freed_only_when_all_its_jobs_end() -> None:
    n = box(1)
    run = (running(1, 0, frac(0.5), 40 * GiB), running(2, 0, frac(0.25), 20 * GiB))
    frees = free_view(Snapshot(nodes=(n,), running=run))[0]
    releases = [
        Release(100.0, "box", (0,), frac(0.5), 40 * GiB),
        Release(300.0, "box", (0,), frac(0.25)),  # memory recomputed: 20GiB
    ]
    shadow = reserve(9, Resources(gpus=1), frees, releases, now=0.0)
    assert shadow is not None and shadow.time == 300.0


def test_fractional_job_outlasting_the_reservation_keeps_off_reserved_gpus() -> None:
    # GPU 0 is shared and its job ends at 100: the whole job at the head reserves it then.
    # GPU 1 is held whole until 1000. A long fractional job may not share GPU 0 now, a short
    # one may (it ends before the reservation).
    run = (
        RunningJob(1, "box", (1,), Resources(gpus=1), 0.0, time_limit_s=1000.0),
        RunningJob(2, "box", (0,), frac(0.25), 0.0, time_limit_s=100.0, gpu_memory_bytes=20 * GiB),
    )
    pending = (
        PendingJob(3, Resources(gpus=1), 300, 1.0),
        PendingJob(4, frac(0.25), 200, 2.0, time_limit_s=5000.0),
        PendingJob(5, frac(0.25), 200, 3.0, time_limit_s=50.0),
    )
    d = decide(Snapshot(nodes=(box(2),), running=run, pending=pending), now=0.0)
    assert [r.gpus for r in d.reservations] == [(0,)]
    assert [(s.job_id, s.gpus) for s in d.starts] == [(5, (0,))]
    assert d.pending[4].code.value == "Priority"


def test_free_index_places_fractions_on_nodes_without_free_gpus() -> None:
    run = (running(1, 0, frac(0.5), 40 * GiB),)
    index = FreeIndex(free_view(Snapshot(nodes=(box(1),), running=run))[0])
    assert index.most() == 1
    placement = index.place(frac(0.5))
    assert placement is not None and placement.gpus == (0,)
    index.take(placement, frac(0.5))
    assert index.place(frac(0.1)) is None
