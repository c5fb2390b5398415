"""The pool's fragmentation as people see it (service/fragmentation.py): the largest job that
could start now, per node and for the pool, against the free GPUs, in GET /v1/gpus (the API's
wire), `gpupool gpus` (its summary line, read back through the client's view) and /metrics."""

from __future__ import annotations

from policy_builders import node
from test_metrics import Pool, pool  # noqa: F401  (the metrics' pool fixture)

from gpupool.api.wire import gpus_to_wire
from gpupool.cli.gpus import room_line
from gpupool.client.pool_views import read_gpus
from gpupool.core.hardware import Inventory
from gpupool.core.job import Job, JobSpec, JobState, Resources
from gpupool.service.fragmentation import Fragmentation, NodeRoom, from_holders
from gpupool.service.pool_stats import gpu_holders

GIB = 2**30


def running(job_id: int, node_name: str, gpus: tuple[int, ...], memory: int | None = None) -> Job:
    res = Resources(gpus=len(gpus)) if memory is None else Resources(gpus=1, gpu_fraction=0.5)
    spec = JobSpec(command=("true",), workdir="/", resources=res)
    return Job(
        job_id, spec, "alice", JobState.RUNNING, 0.0, start_time=1.0, node=node_name,
        gpus=gpus, gpu_memory_bytes=memory,
    )  # fmt: skip


def fragmented_pool() -> tuple[Inventory, list[Job]]:
    """Two 8-GPU nodes with 4 GPUs held on each (one of them shared by a fractional job)."""
    inventory = Inventory((node("a"), node("b")), "declared")
    jobs = [
        running(1, "a", (0, 1)),
        running(2, "a", (2,)),
        running(3, "a", (3,), memory=40 * GIB),
        running(4, "b", (0, 1, 2, 3)),
    ]
    return inventory, jobs


def test_free_gpus_spread_over_nodes_start_no_job_as_large_as_their_count() -> None:
    inventory, jobs = fragmented_pool()
    room = from_holders(inventory, gpu_holders(jobs))
    assert room == Fragmentation((NodeRoom("a", 4, 4), NodeRoom("b", 4, 4)), 8, 4)
    assert room.fragmented
    whole = from_holders(inventory, gpu_holders(jobs[:3]))
    assert (whole.free_gpus, whole.largest_startable_gpus, whole.fragmented) == (12, 8, True)
    empty = from_holders(Inventory((node("a"),), "declared"), {})
    assert (empty.free_gpus, empty.largest_startable_gpus, empty.fragmented) == (8, 8, False)


def test_the_api_and_gpupool_gpus_show_it() -> None:
    inventory, jobs = fragmented_pool()
    wire = gpus_to_wire(inventory, gpu_holders(jobs))
    assert (wire["free_gpus"], wire["largest_startable_gpus"]) == (8, 4)
    assert [(n["name"], n["free_gpus"], n["largest_startable_gpus"]) for n in wire["nodes"]] == [
        ("a", 4, 4),
        ("b", 4, 4),
    ]
    view = read_gpus(dict(wire))
    assert room_line(view) == (
        "Free: 8 of 16 GPUs; the largest job that could start now: 4 GPUs (the free GPUs are "
        "spread over nodes: a 4, b 4)"
    )
    jobs.append(running(5, "b", (4, 5, 6, 7)))
    whole = read_gpus(dict(gpus_to_wire(inventory, gpu_holders(jobs))))
    assert room_line(whole) == "Free: 4 of 16 GPUs; the largest job that could start now: 4 GPUs"


def test_an_older_daemon_without_the_figures_is_counted_by_the_client() -> None:
    inventory, jobs = fragmented_pool()
    wire = dict(gpus_to_wire(inventory, gpu_holders(jobs)))
    del wire["free_gpus"], wire["largest_startable_gpus"]
    for n in wire["nodes"]:
        del n["free_gpus"], n["largest_startable_gpus"]  # type: ignore[misc]
    view = read_gpus(wire)
    assert (view.free_gpus, view.largest_startable_gpus) == (8, 4)
    assert [(n.free_gpus, n.largest_startable_gpus) for n in view.nodes] == [(4, 4), (4, 4)]


def test_metrics_export_the_largest_startable_job_per_node_and_for_the_pool(
    pool: Pool,  # noqa: F811
) -> None:
    whole = pool.submit(resources=Resources(gpus=2))
    half = pool.submit(resources=Resources(gpus=1, gpu_fraction=0.5))
    pool.start(whole, (0, 1))
    pool.start(half, (2,), memory=40 * GIB)
    got = pool.scrape()
    assert got["gpupool_largest_startable_gpus"] == {(("node", pool.node),): 1.0}
    assert got["gpupool_pool_free_gpus"] == {(): 1.0}
    assert got["gpupool_pool_largest_startable_gpus"] == {(): 1.0}
