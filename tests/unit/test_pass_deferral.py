"""The engine's pass waits while a burst of submissions is in flight (engine/pacing.py,
`PassDeferral`), with a real store (SQLite, and PostgreSQL where the tests have it), a real
executor and the engine's own thread: the API side's load is a stand-in whose count the
test sets (the daemon's is the group commit's, tests/unit/test_group_commit.py)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from executor_helpers import stop_everything, wait_for
from prometheus_client.parser import text_string_to_metric_families
from test_store import store_url_fixture  # noqa: F401  (fixture)

from gpupool.api.metrics import PoolMetrics
from gpupool.core.execution import RunAs
from gpupool.core.job import JobSpec, JobState
from gpupool.engine import Engine
from gpupool.engine.pacing import PassDeferral
from gpupool.executor import LocalExecutor
from gpupool.inventory import resolve_inventory
from gpupool.service import PoolService
from gpupool.store import Store

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")
ENV = (("PATH", os.environ.get("PATH", "/usr/bin:/bin")),)
SLEEPER = JobSpec(command=("sleep", "60"), workdir="/", base_env=ENV)


class Load:
    """Submissions in flight, as the test says."""

    def __init__(self, n: int) -> None:
        self.n = n

    def submissions_in_flight(self) -> int:
        return self.n


@pytest.fixture
def pool(store_url: str, tmp_path: Path) -> Iterator[tuple[Store, Engine, PoolService, Load]]:
    store = Store.open(store_url)
    # The jobs' users are names here, not Unix users: run them as we are.
    executor = LocalExecutor(tmp_path / "jobs-state", run_as=RunAs.DAEMON)
    inventory = resolve_inventory(gpus="1xA100-80GB")
    engine = Engine(store, executor, inventory)
    load = Load(0)
    engine.arrivals = load
    service = PoolService(store, executor, engine, inventory)
    engine.start()
    try:
        yield store, engine, service, load
    finally:
        engine.stop()
        stop_everything(executor)
        executor.close()
        store.close()


def test_a_pass_waits_while_a_burst_is_in_flight_and_runs_once_it_drains(
    pool: tuple[Store, Engine, PoolService, Load],
) -> None:
    store, engine, service, load = pool
    engine.deferral = PassDeferral(at=8, max_s=3600.0)  # only the drain lets it run
    metrics = PoolMetrics(service)
    engine.observer = metrics
    load.n = 50
    passes = engine.passes
    job = service.submit(SLEEPER, "alice", time.time())
    wait_for(lambda: engine.passes_deferred == 1, what="a deferred pass")
    assert engine.passes == passes
    assert store.get(job.id).state is JobState.PENDING
    load.n = 0
    wait_for(lambda: store.get(job.id).state is JobState.RUNNING, what="the job running")
    assert engine.passes_deferred == 1  # one pass waited, however often it looked again
    assert _deferred_total(metrics) == 1.0  # and /metrics says so


def _deferred_total(metrics: PoolMetrics) -> float:
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            if sample.name == "gpupool_scheduling_passes_deferred_total":
                return sample.value
    raise AssertionError("no gpupool_scheduling_passes_deferred_total")


@pytest.mark.parametrize(
    ("in_flight", "max_s", "waited"),
    [
        (50, 0.3, True),  # a stream that never drains: the pass runs after max_s anyway
        (7, 3600.0, False),  # fewer than the threshold: the pass never waits
    ],
    ids=["a-stream-that-never-drains", "few-in-flight"],
)
def test_the_job_starts_whatever_the_load_and_only_a_burst_makes_its_pass_wait(
    pool: tuple[Store, Engine, PoolService, Load], in_flight: int, max_s: float, waited: bool
) -> None:
    store, engine, service, load = pool
    engine.deferral = PassDeferral(at=8, max_s=max_s)
    load.n = in_flight
    job = service.submit(SLEEPER, "alice", time.time())
    wait_for(lambda: store.get(job.id).state is JobState.RUNNING, what="the job running")
    assert (engine.passes_deferred > 0) is waited


def test_a_pass_asked_for_never_waits(
    pool: tuple[Store, Engine, PoolService, Load],
) -> None:
    store, engine, service, load = pool
    engine.deferral = PassDeferral(at=8, max_s=3600.0)
    load.n = 50
    job = service.submit(SLEEPER, "alice", time.time())
    wait_for(lambda: engine.passes_deferred >= 1, what="a deferred pass")
    decision = engine.run_pass()  # as after a refused commit: the engine asks for one
    assert [s.job_id for s in decision.starts] == [job.id]
