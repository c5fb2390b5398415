"""`/metrics`' figures (service/pool_stats.py) and their exposition (api/metrics.py), on a real
store, engine and service without a daemon (as tests/unit/test_engine_view.py builds them),
read back through prometheus_client's own parser of the text format."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from executor_helpers import stop_everything
from prometheus_client.parser import text_string_to_metric_families

from fixtures.fake_nvml import FakeGpu, FakeNvml
from gpupool.api.metrics import CONTENT_TYPE, FAMILIES, PoolMetrics
from gpupool.core.clock import FakeClock
from gpupool.core.engine_observer import JobStarted
from gpupool.core.execution import RunAs
from gpupool.core.job import Job, JobSpec, JobState, Resources
from gpupool.core.project import Project
from gpupool.engine import Engine
from gpupool.engine.observer import first_starts
from gpupool.executor import LocalExecutor
from gpupool.inventory import resolve_inventory
from gpupool.monitor.gpu_monitor import GpuMonitor, PoolJobs, sampler_for
from gpupool.monitor.nvml_sampler import NvmlSampler
from gpupool.service import PoolService
from gpupool.store import Store

GIB = 2**30
FAR = time.time() + 365 * 86400.0  # a --begin that keeps a job pending


@dataclass
class Pool:
    store: Store
    engine: Engine
    service: PoolService
    metrics: PoolMetrics
    executor: LocalExecutor
    node: str

    def submit(self, user: str = "alice", begin: float | None = None, **spec: Any) -> int:
        """A job queued through the service (pending until started or run): JobSpec's
        fields, a `sleep 60` in / by default."""
        fields: dict[str, Any] = {"command": ("sleep", "60"), "workdir": "/", **spec}
        return self.service.submit(JobSpec(**fields, begin_time=begin), user, time.time()).id

    def start(self, job_id: int, gpus: tuple[int, ...], memory: int | None = None) -> None:
        """Commit a start as a pass would, and hand it to the engine's view (no process
        is launched: no pass runs)."""
        version = self.store.allocation_version()
        self.store.commit_starts([(job_id, self.node, gpus, memory)], version, time.time())
        self.engine.stored(self.store.get(job_id))

    def sample(self) -> None:
        """One sample of every GPU with the simulated sampler of the declared inventory."""
        jobs = PoolJobs(lambda: self.engine.view().jobs.values(), lambda _: None)
        monitor = GpuMonitor(sampler_for(self.service.inventory, jobs))
        monitor.sample_now()
        self.service.monitor = monitor

    def scrape(self) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
        """The exposition, parsed: sample name -> its labels (sorted pairs) -> value."""
        # No engine thread here: take in what was posted, as its thread does in the daemon
        # (a scrape reads the view as published, without waiting).
        self.engine.view()
        return parse(self.metrics.render().decode())


def parse(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return found


def gpu(node: str, index: int) -> tuple[tuple[str, str], ...]:
    return (("gpu", str(index)), ("model", "A100-80GB"), ("node", node))


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[Pool]:
    store = Store.open(f"sqlite:///{tmp_path / 'state.db'}")
    executor = LocalExecutor(tmp_path / "jobs-state", run_as=RunAs.DAEMON)
    inventory = resolve_inventory(gpus="4xA100-80GB")
    engine = Engine(store, executor, inventory)
    service = PoolService(store, executor, engine, inventory)
    metrics = PoolMetrics(service)
    engine.observer = metrics
    yield Pool(store, engine, service, metrics, executor, inventory.nodes[0].name)
    engine.stop()
    stop_everything(executor)
    executor.close()
    store.close()


def test_each_gpu_shows_what_is_allocated_and_what_its_sample_says(pool: Pool) -> None:
    whole = pool.submit(resources=Resources(gpus=2), env=(("GPUPOOL_SIMULATED_UTIL", "35"),))
    half = pool.submit(resources=Resources(gpus=1, gpu_fraction=0.5))
    pool.start(whole, (0, 1))
    pool.start(half, (2,), memory=40 * GIB)
    pool.sample()
    got = pool.scrape()
    n = pool.node
    allocated = got["gpupool_gpu_allocated_ratio"]
    assert [allocated[gpu(n, i)] for i in range(4)] == [1.0, 1.0, 0.5, 0.0]
    assert got["gpupool_gpu_memory_total_bytes"][gpu(n, 3)] == 80 * GIB
    utilization = got["gpupool_gpu_utilization_ratio"]
    # Simulated: the whole-GPU job declares 35%; the shared one says nothing (busy).
    assert [utilization[gpu(n, i)] for i in range(4)] == [0.35, 0.35, 1.0, 0.0]
    assert got["gpupool_gpu_memory_used_bytes"][gpu(n, 2)] == 40 * GIB
    assert got["gpupool_gpu_temperature_celsius"][gpu(n, 0)] == 30.0 + 0.5 * 35
    assert set(got["gpupool_gpu_sample_simulated"].values()) == {1.0}
    # The simulated sampler knows no board power: not exported, rather than a made-up 0.
    assert "gpupool_gpu_power_watts" not in got


def test_a_gpu_read_through_nvml_says_so_and_shows_its_power(pool: Pool) -> None:
    nvml = FakeNvml(
        [FakeGpu(utilization=87, memory_used=30 * GIB, power_mw=312_500, temperature=64)]
        + [FakeGpu() for _ in range(3)]
    )
    monitor = GpuMonitor(NvmlSampler.open(pool.node, lambda: {}, nvml))
    monitor.sample_now()
    pool.service.monitor = monitor
    got = pool.scrape()
    first = gpu(pool.node, 0)
    assert got["gpupool_gpu_utilization_ratio"][first] == 0.87
    assert got["gpupool_gpu_memory_used_bytes"][first] == 30 * GIB
    assert got["gpupool_gpu_power_watts"][first] == 312.5
    assert got["gpupool_gpu_temperature_celsius"][first] == 64.0
    assert got["gpupool_gpu_sample_simulated"][first] == 0.0
    assert got["gpupool_gpu_sample_timestamp_seconds"][first] == pytest.approx(time.time(), abs=60)
    monitor.stop()


def test_without_samples_only_the_inventory_and_allocation_are_exported(pool: Pool) -> None:
    got = pool.scrape()
    assert len(got["gpupool_gpu_allocated_ratio"]) == 4
    assert len(got["gpupool_gpu_memory_total_bytes"]) == 4
    for sampled in ("utilization_ratio", "memory_used_bytes", "sample_simulated"):
        assert f"gpupool_gpu_{sampled}" not in got


def test_each_running_job_shows_its_gpus_and_their_use_never_its_command(pool: Pool) -> None:
    secret = "--api-key=hunter2"
    busy = pool.submit(
        user="bob",
        name="train-a",
        command=("python", "train.py", secret),
        resources=Resources(gpus=2),
        env=(("GPUPOOL_SIMULATED_UTIL", "40"), ("WANDB_API_KEY", "hunter3")),
    )
    shared = pool.submit(resources=Resources(gpus=1, gpu_fraction=0.25))
    waiting = pool.submit(resources=Resources(gpus=1), begin=FAR)
    pool.start(busy, (0, 1))
    pool.start(shared, (3,), memory=20 * GIB)
    pool.sample()
    got = pool.scrape()
    labels = (("job_id", str(busy)), ("name", "train-a"), ("project", "default"), ("user", "bob"))
    assert got["gpupool_job_allocated_gpus"][labels] == 2.0
    assert got["gpupool_job_gpu_utilization_ratio"][labels] == 0.4
    unnamed = (("job_id", str(shared)), ("name", ""), ("project", "default"), ("user", "alice"))
    assert got["gpupool_job_allocated_gpus"][unnamed] == 0.25
    assert str(waiting) not in {dict(k)["job_id"] for k in got["gpupool_job_allocated_gpus"]}
    assert got["gpupool_jobs"] == {(("state", "pending"),): 1.0, (("state", "running"),): 2.0}
    text = pool.metrics.render().decode()
    for private in (secret, "hunter3", "WANDB_API_KEY", "train.py", "sleep"):
        assert private not in text


def test_each_project_shows_quota_limit_use_borrowing_and_queue(pool: Pool) -> None:
    pool.store.create_project(Project("vision", quota=1, limit=3))
    pool.store.create_project(Project("nlp", quota=2))
    over = pool.submit(project="vision", resources=Resources(gpus=2), preemptible=True)
    pool.start(over, (0, 1))
    pool.submit(project="nlp", resources=Resources(gpus=3), begin=FAR)
    pool.submit(project="nlp", resources=Resources(gpus=1), begin=FAR)
    got = pool.scrape()

    def of(name: str, project: str) -> float | None:
        return got[f"gpupool_project_{name}"].get((("project", project),))

    assert (of("quota_gpus", "vision"), of("limit_gpus", "vision")) == (1.0, 3.0)
    assert (of("used_gpus", "vision"), of("borrowed_gpus", "vision")) == (2.0, 1.0)
    assert of("running_jobs", "vision") == 1.0
    assert of("limit_gpus", "nlp") is None  # no limit: absent, not 0 or +Inf
    assert (of("pending_jobs", "nlp"), of("pending_gpus", "nlp")) == (2.0, 4.0)
    assert (of("used_gpus", "nlp"), of("borrowed_gpus", "nlp")) == (0.0, 0.0)
    assert of("quota_gpus", "default") == 0.0  # every project, even without jobs


def test_nothing_is_borrowed_while_no_project_has_a_quota(pool: Pool) -> None:
    job = pool.submit(resources=Resources(gpus=3))
    pool.start(job, (0, 1, 2))
    got = pool.scrape()
    assert got["gpupool_project_used_gpus"][(("project", "default"),)] == 3.0
    assert got["gpupool_project_borrowed_gpus"][(("project", "default"),)] == 0.0


@dataclass
class MeteredEngine:
    """A real store, executor, engine and service on 2 GPUs, their /metrics, a fake clock."""

    store: Store
    engine: Engine
    service: PoolService
    metrics: PoolMetrics
    clock: FakeClock


@contextmanager
def metered_engine(tmp_path: Path) -> Iterator[MeteredEngine]:
    """`MeteredEngine` at t=1000, everything stopped and closed after."""
    store = Store.open(f"sqlite:///{tmp_path / 'state.db'}")
    executor = LocalExecutor(tmp_path / "jobs-state", run_as=RunAs.DAEMON)
    inventory = resolve_inventory(gpus="2xA100-80GB")
    clock = FakeClock(1000.0)
    engine = Engine(store, executor, inventory, clock=clock)
    service = PoolService(store, executor, engine, inventory)
    metrics = PoolMetrics(service)
    engine.observer = metrics
    try:
        yield MeteredEngine(store, engine, service, metrics, clock)
    finally:
        engine.stop()
        stop_everything(executor)
        executor.close()
        store.close()


def test_a_pass_and_a_first_start_are_measured_by_the_engine(tmp_path: Path) -> None:
    with metered_engine(tmp_path) as m:
        store, engine, service, metrics, clock = m.store, m.engine, m.service, m.metrics, m.clock
        spec = JobSpec(command=("true",), workdir="/", resources=Resources(gpus=1))
        job = service.submit(spec, "alice", 1000.0)
        clock.advance(42.0)  # it waits 42 s, then a pass starts it
        engine.run_pass()
        assert store.get(job.id).state in (JobState.RUNNING, JobState.SUCCEEDED)
        got = parse(metrics.render().decode())
        project = (("project", "default"),)
        assert got["gpupool_job_wait_seconds_count"][project] == 1.0
        assert got["gpupool_job_wait_seconds_sum"][project] == 42.0
        buckets = got["gpupool_job_wait_seconds_bucket"]
        assert buckets[(("le", "30.0"), ("project", "default"))] == 0.0
        assert buckets[(("le", "60.0"), ("project", "default"))] == 1.0
        assert got["gpupool_scheduling_pass_duration_seconds_count"][()] >= 1.0
        assert got["gpupool_scheduling_pass_duration_seconds_sum"][()] > 0.0


class Failing:
    """An observer that fails at every call."""

    def pass_ran(self, seconds: float) -> None:
        raise RuntimeError("observer down")

    def job_started(self, start: JobStarted) -> None:
        raise RuntimeError("observer down")

    def pass_deferred(self) -> None:
        raise RuntimeError("observer down")


def test_a_failing_observer_costs_a_measurement_never_a_start(
    pool: Pool, caplog: pytest.LogCaptureFixture
) -> None:
    pool.engine.observer = Failing()
    job = pool.submit(command=("true",), resources=Resources(gpus=1))
    pool.engine.run_pass()
    assert pool.store.get(job).state in (JobState.RUNNING, JobState.SUCCEEDED)
    assert "the observer failed" in caplog.text
    # Launched in that same round: the commit's events were not lost to the failure.
    assert pool.executor.job_dir(job).joinpath("launch.json").exists()


def test_the_exposition_is_prometheus_text_with_help_on_every_family(pool: Pool) -> None:
    job = pool.submit(resources=Resources(gpus=1))
    pool.start(job, (0,))
    pool.sample()
    text = pool.metrics.render().decode()
    families = list(text_string_to_metric_families(text))
    names = {f.name for f in families}
    assert {name for name, _, _ in FAMILIES} <= names
    assert {"gpupool_job_wait_seconds", "gpupool_scheduling_pass_duration_seconds"} <= names
    for family in families:  # the pool's, or the client library's standard process_* ones
        assert family.name.startswith(("gpupool_", "process_")), family.name
        assert family.documentation, f"{family.name} has no HELP"
    assert CONTENT_TYPE.startswith("text/plain; version=0.0.4")


def test_a_scrape_reads_nothing_from_the_store(pool: Pool) -> None:
    import sqlalchemy as sa

    job = pool.submit(resources=Resources(gpus=1))
    pool.start(job, (0,))
    pool.sample()
    pool.scrape()  # the first reads the projects, which the service keeps after
    statements: list[str] = []

    def seen(conn: object, cursor: object, statement: str, *rest: object) -> None:
        statements.append(statement)

    sa.event.listen(pool.store._engine, "before_cursor_execute", seen)
    try:
        for _ in range(3):
            pool.metrics.render()
    finally:
        sa.event.remove(pool.store._engine, "before_cursor_execute", seen)
    assert statements == []


def test_only_a_jobs_first_start_is_a_wait() -> None:
    spec = JobSpec(command=("true",), project="vision")
    first = Job(1, spec, "alice", JobState.RUNNING, submit_time=100.0, start_time=130.0)
    again = Job(2, spec, "alice", JobState.RUNNING, 100.0, start_time=900.0, restart_count=1)
    assert first_starts([first, again]) == [JobStarted(1, "vision", 30.0)]


def test_the_daemons_own_memory_rss_and_live(pool: Pool) -> None:
    """Goal 8 of issue 35 asks for both: RSS (process_resident_memory_bytes, as /proc has
    it) and the interpreter's live memory (its allocated blocks), which grows with what the
    daemon keeps and shrinks when it lets go."""
    before = pool.scrape()
    rss = before["process_resident_memory_bytes"][()]
    with open("/proc/self/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    assert 0.5 * kib * 1024 < rss < 2 * kib * 1024
    assert before["process_open_fds"][()] >= 3
    # Without the cyclic collector in between: it would free earlier tests' garbage while
    # the lists are made, and hide them (blocks are counted, whoever holds them).
    gc.collect()
    gc.disable()
    try:
        blocks = pool.scrape()["gpupool_daemon_python_allocated_blocks"][()]
        kept = [[i] for i in range(1000, 101_000)]  # 200,000 blocks at least: a list, an int
        grown = pool.scrape()["gpupool_daemon_python_allocated_blocks"][()]
        assert grown - blocks >= 150_000
        del kept
        assert pool.scrape()["gpupool_daemon_python_allocated_blocks"][()] < grown - 150_000
    finally:
        gc.enable()
