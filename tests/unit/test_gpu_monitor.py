"""The daemon's GPU monitor (monitor/gpu_monitor.py): the latest sample per GPU, and a
sampler that fails never stops it."""

from __future__ import annotations

import logging

import pytest
from executor_helpers import wait_for

from gpupool.core.gpu_health import HealthEvent, xid_event
from gpupool.core.hardware import Gpu, Inventory, Node
from gpupool.core.job import Job, JobSpec, JobState, Resources
from gpupool.core.monitoring import GpuSample
from gpupool.monitor.gpu_monitor import GpuMonitor, PoolJobs, sampler_for

GIB = 2**30


def sample(index: int, util: float, now: float) -> GpuSample:
    return GpuSample("box", index, now, util, 0, 80 * GIB, None, None, (), True)


class Scripted:
    """A sampler that answers from a list (an exception entry is raised)."""

    simulated = True

    def __init__(self, answers: list[float | Exception]) -> None:
        self.answers = answers
        self.asked = 0
        self.closed = False

    def sample(self, now: float) -> tuple[GpuSample, ...]:
        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        if isinstance(answer, Exception):
            raise answer
        return (sample(0, answer, now), sample(1, answer, now))

    def close(self) -> None:
        self.closed = True


def test_the_latest_sample_of_each_gpu_is_kept_and_the_sampler_closed_at_stop() -> None:
    sampler = Scripted([10.0, 20.0, 30.0])
    monitor = GpuMonitor(sampler, interval_s=0.01, clock=lambda: 5.0)
    monitor.start()  # samples at once
    try:
        wait_for(lambda: sampler.asked >= 3, what="three samples")
        latest = monitor.latest()
        assert sorted(latest) == [("box", 0), ("box", 1)]
        assert latest[("box", 0)].utilization_pct == 30.0 and latest[("box", 0)].time == 5.0
    finally:
        monitor.stop()
    assert sampler.closed


def test_a_failing_sampler_is_said_once_and_asked_again(caplog: pytest.LogCaptureFixture) -> None:
    sampler = Scripted([RuntimeError("GPU fell off the bus"), RuntimeError("again"), 50.0])
    monitor = GpuMonitor(sampler, interval_s=0.01)
    with caplog.at_level(logging.WARNING, logger="gpupool.monitor"):
        monitor.start()
        try:
            wait_for(lambda: monitor.latest(), what="a sample after the failures")
        finally:
            monitor.stop()
    said = [r.getMessage() for r in caplog.records if r.name == "gpupool.monitor"]
    assert len(said) == 1 and "GPU fell off the bus" in said[0]
    assert monitor.latest()[("box", 1)].utilization_pct == 50.0


def test_a_declared_inventory_is_sampled_from_what_its_running_jobs_declare() -> None:
    nodes = tuple(Node(n, tuple(Gpu(i, "A100-80GB", 80 * GIB) for i in range(2))) for n in "ab")
    inventory = Inventory(nodes=nodes, source="declared")
    spec = JobSpec(
        command=("sleep", "1"),
        resources=Resources(gpus=1),
        env=(("GPUPOOL_SIMULATED_UTIL", "35"),),
        base_env=(("GPUPOOL_SIMULATED_UTIL", "90"),),  # exported: the explicit one wins
    )
    running = Job(id=4, spec=spec, user="alice", submit_time=1.0, state=JobState.RUNNING,
                  node="b", gpus=(1,))  # fmt: skip
    pending = Job(id=5, spec=spec, user="bob", submit_time=1.0, state=JobState.PENDING)
    jobs = PoolJobs(lambda: [running, pending], {4: 4242}.get)
    sampler = sampler_for(inventory, jobs)
    assert sampler.simulated
    by_gpu = {(s.node, s.index): s for s in sampler.sample(now=9.0)}
    assert by_gpu[("b", 1)].utilization_pct == 35.0
    assert by_gpu[("b", 1)].jobs() == {4} and by_gpu[("b", 1)].processes[0].pid == 4242
    assert all(s.utilization_pct == 0.0 for k, s in by_gpu.items() if k != ("b", 1))


def test_the_client_reads_a_gpu_without_a_sample_from_an_older_daemon_as_not_sampled() -> None:
    from gpupool.client.pool_views import read_gpus

    gpu = {"index": 0, "model": "A100-80GB", "memory_bytes": 80 * GIB, "nvlink_peers": [],
           "job": None, "job_name": None, "user": None, "shared": False, "jobs": []}  # fmt: skip
    old = read_gpus({"source": "declared", "note": "", "nodes": [{"name": "a", "gpus": [gpu]}]})
    assert old.nodes[0].gpus[0].usage is None
    sampled = {**gpu, "usage": {"simulated": True, "utilization_pct": 35.0,
               "memory_used_bytes": GIB, "memory_total_bytes": 80 * GIB, "power_w": None,
               "temperature_c": 47.5, "foreign_memory_bytes": 0}}  # fmt: skip
    new = read_gpus({"source": "declared", "note": "", "nodes": [{"name": "a", "gpus": [sampled]}]})
    usage = new.nodes[0].gpus[0].usage
    assert usage is not None and usage.utilization_pct == 35.0 and usage.simulated


class Sink:
    """A SampleSink that keeps what it is given (and can fail on demand)."""

    def __init__(self) -> None:
        self.rounds: list[tuple[float, list[tuple[int, float]]]] = []
        self.rolled: list[float] = []
        self.fail = False

    def record_samples(self, samples, deltas) -> None:  # type: ignore[no-untyped-def]
        if self.fail:
            raise OSError("disk full")
        self.rounds.append((samples[0].time, [(d.job_id, d.sampled_gpu_s) for d in deltas]))

    def roll_up_samples(self, now: float) -> int:
        self.rolled.append(now)
        return 0


def test_each_round_is_kept_with_what_holders_used_for_the_time_since_the_last_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from gpupool.core.gpu_usage import Holder

    times = iter([100.0, 101.0, 100.5, 150.0, 190.0, 200.0])
    sink = Sink()
    holder = Holder(3, "box", (0,), Resources(gpus=1))
    monitor = GpuMonitor(
        Scripted([50.0]), interval_s=1.0, clock=lambda: next(times), sink=sink,
        holders=lambda: [holder],
    )  # fmt: skip
    monitor.sample_now()  # 100: the first round stands for one interval
    monitor.sample_now()  # 101
    monitor.sample_now()  # 100.5: the clock went back: not kept
    monitor.sample_now()  # 150: after a gap, at most two intervals are charged
    sink.fail = True
    with caplog.at_level(logging.WARNING, logger="gpupool.monitor"):
        monitor.sample_now()  # 190: the sink fails: said, the pool goes on
    sink.fail = False
    monitor.sample_now()  # 200: 10 s since 190 (which happened, even if not kept) -> 2
    assert sink.rounds == [
        (100.0, [(3, 1.0)]), (101.0, [(3, 1.0)]), (150.0, [(3, 2.0)]), (200.0, [(3, 2.0)])
    ]  # fmt: skip
    assert sink.rolled == [100.0, 200.0]  # about once a minute
    assert any("disk full" in r.getMessage() for r in caplog.records)
    assert monitor.latest()[("box", 0)].time == 200.0


def test_foreign_memory_is_told_when_it_changes_only() -> None:
    from gpupool.core.monitoring import GpuProcess

    foreign_bytes = iter([5 * GIB, 5 * GIB, 0, 0])

    class WithForeign(Scripted):
        def sample(self, now: float) -> tuple[GpuSample, ...]:
            held = next(foreign_bytes)
            procs = (GpuProcess(99, held, None),) if held else ()
            return (GpuSample("box", 0, now, 10.0, held, 80 * GIB, None, None, procs, False),)

    told: list[dict[tuple[str, int], int]] = []
    monitor = GpuMonitor(
        WithForeign([0.0]), interval_s=1.0, on_foreign=lambda m: told.append(dict(m))
    )
    for _ in range(4):
        monitor.sample_now()
    assert told == [{("box", 0): 5 * GIB}, {}]


class ScriptedHealth:
    """Health reads answering in turn: events, or an exception to raise."""

    def __init__(self, answers: list[list[HealthEvent] | Exception]) -> None:
        self.answers, self.asked, self.closed = answers, 0, False

    def read(self, now: float) -> list[HealthEvent]:
        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        if isinstance(answer, Exception):
            raise answer
        return answer

    def close(self) -> None:
        self.closed = True


def test_health_is_read_each_round_and_events_told_a_failure_only_logged() -> None:
    event = xid_event("box", 1, 5.0, 79)
    health = ScriptedHealth([[], RuntimeError("NVML broke"), [event], []])
    told: list[list[HealthEvent]] = []
    monitor = GpuMonitor(
        Scripted([10.0]), interval_s=0.01, health=health, on_health=lambda e: told.append(list(e))
    )
    monitor.start()
    try:
        wait_for(lambda: health.asked >= 4, what="four health reads")
    finally:
        monitor.stop()
    assert told == [[event]]  # empty reads are not told; the failing one did not stop it
    assert health.closed
