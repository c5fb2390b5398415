"""The pool's per-GPU defaults on every submit path through the service (single, batch,
array: the SDK's jobs arrive as single or batch submissions), stored in the job's request and
said in its history (policy/per_gpu_defaults.py, service/pool_service.py `submission`)."""

from __future__ import annotations

from typing import Any

import pytest
from test_projects_store import _Engine
from test_store import spec, store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.core.hardware import Gpu, Inventory, Node
from gpupool.core.job import Job, JobSpec, Resources
from gpupool.core.job_control import ArrayRequest
from gpupool.policy.per_gpu_defaults import PerGpuDefaults
from gpupool.service import PoolService
from gpupool.service.batch_submit import BatchItem, submit_batch
from gpupool.store import Store

GiB = 1 << 30


# Figures no default here reaches (a declared inventory has this machine's, 2 CPUs in CI).
def box(gpus: int, cpus: int, memory_bytes: int) -> Inventory:
    """One declared node of A100s with these CPUs and memory."""
    a100s = tuple(Gpu(i, "A100-80GB", 80 * GiB) for i in range(gpus))
    return Inventory((Node("box", a100s, cpus=cpus, memory_bytes=memory_bytes),), "declared")


# Figures no default here reaches (a declared inventory has this machine's: 2 CPUs in CI).
ROOMY = box(4, cpus=64, memory_bytes=512 * GiB)
DEFAULTS = PerGpuDefaults(mem_bytes=GiB, cpus=1)
FROM_POOL = (
    "memory 2GiB (the pool's default, 1GiB per GPU: no --mem); "
    "2 CPUs (the pool's default, 1 per GPU: no --cpus)"
)


def service(
    store: Store, defaults: PerGpuDefaults = DEFAULTS, inventory: Inventory | None = None
) -> PoolService:
    inv = inventory if inventory is not None else ROOMY
    no_executor: Any = None  # submissions never reach it
    return PoolService(store, no_executor, _Engine(), inv, per_gpu_defaults=defaults)


def asking(res: Resources) -> JobSpec:
    return JobSpec(command=("python", "train.py"), resources=res)


def request(job: Job) -> tuple[int | None, int | None]:
    return job.spec.resources.mem_bytes, job.spec.resources.cpus


def test_a_single_submission_is_given_the_defaults_and_its_history_says_so(store: Store) -> None:
    job = service(store).submit(spec(gpus=2), "alice", 1.0)
    stored = store.get(job.id)
    assert request(stored) == (2 * GiB, 2)
    assert stored.events[0].cause.startswith("submitted by alice; ")
    assert FROM_POOL in stored.events[0].cause


def test_a_job_without_gpus_or_with_its_own_figures_is_left_alone(store: Store) -> None:
    pool = service(store)
    none = store.get(pool.submit(spec(gpus=0), "alice", 1.0).id)
    assert request(none) == (None, None)
    assert "the pool's default, " not in none.events[0].cause
    own = asking(Resources(gpus=2, cpus=3, mem_bytes=5 * GiB))
    mine = store.get(pool.submit(own, "alice", 1.0).id)
    assert request(mine) == (5 * GiB, 3)
    assert "the pool's default, " not in mine.events[0].cause


def test_off_the_request_is_stored_as_it_came(store: Store) -> None:
    job = store.get(service(store, PerGpuDefaults()).submit(spec(gpus=2), "alice", 1.0).id)
    assert request(job) == (None, None)


def test_every_job_of_a_batch_is_given_the_defaults(store: Store) -> None:
    items = [
        BatchItem(spec(gpus=2), project_given=False),
        BatchItem(asking(Resources(gpus=1, gpu_fraction=0.5)), project_given=False),
    ]
    jobs = submit_batch(service(store), items, "alice", 1.0, token="t")
    assert [request(store.get(j.id)) for j in jobs] == [(2 * GiB, 2), (GiB, 1)]
    assert FROM_POOL in store.get(jobs[0].id).events[0].cause


def test_every_task_of_an_array_is_given_the_defaults(store: Store) -> None:
    pool = service(store)
    first = pool.submit(spec(gpus=2, array=ArrayRequest((0, 1, 2))), "alice", 1.0)
    tasks = [store.get(i) for i in pool.array_task_ids(first.id)]
    assert [request(t) for t in tasks] == [(2 * GiB, 2)] * 3
    assert all(FROM_POOL in t.events[0].cause for t in tasks)


def test_a_default_above_the_node_is_capped_and_the_job_is_not_refused(store: Store) -> None:
    inventory = box(2, cpus=8, memory_bytes=16 * GiB)
    huge = PerGpuDefaults(mem_bytes=64 * GiB, cpus=32)
    job = store.get(service(store, huge, inventory).submit(spec(gpus=2), "alice", 1.0).id)
    assert request(job) == (16 * GiB, 8)
    assert "capped at node box's 16GiB" in job.events[0].cause


@pytest.mark.parametrize("gpus", [1, 4])
def test_the_figures_follow_the_gpu_count(store: Store, gpus: int) -> None:
    job = store.get(service(store).submit(spec(gpus=gpus), "alice", 1.0).id)
    assert request(job) == (gpus * GiB, gpus)
