"""The Ray backend against a real local Ray cluster (tests/ray_cluster.py): a head with 4
fake GPUs and a worker node with 2, started once for this module.

The Backend object is driven directly (LaunchRequest in, Observations out), as the engine
drives it. Without Ray these tests skip, which GPUPOOL_REQUIRE_ALL=1 (CI) turns into
failures. The head-restart test runs last: it kills and restarts the head.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from ray_cluster import RayCluster, head_and_worker, wait_for

from gpupool.backends.ray import open_backend
from gpupool.backends.ray.backend import HEAD_LOST, STOPPED_WAITING, RayBackend
from gpupool.backends.ray.capacity import is_node_id
from gpupool.core.backends import Backend, BackendContext, EngineNodeState
from gpupool.core.execution import (
    Allocation,
    BackendRequest,
    ExitReason,
    Handle,
    LaunchRequest,
    Observation,
    RankLayout,
    RunState,
    StopKind,
)

RUN_DEADLINE_S = 300.0  # a Ray job on a slow, busy 2-core machine: seconds, sometimes minutes
PY = sys.executable


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    yield from head_and_worker(tmp_path_factory.mktemp("ray"), head_gpus=4, worker_gpus=2)


def make_backend(address: str, state_dir: Path, timeout_s: float = 10.0) -> Backend:
    settings = {"kind": "ray", "address": address, "request_timeout_s": timeout_s}
    return open_backend("ray", settings, BackendContext("t1", state_dir))


@pytest.fixture
def ray_backend(cluster: RayCluster, tmp_path: Path) -> Backend:
    return make_backend(cluster.address, tmp_path / "state")


def request(
    job_id: int,
    command: list[str],
    workdir: Path,
    gpus: int = 0,
    nodes: int = 1,
    ranks: RankLayout | None = None,
    time_limit_s: float | None = None,
) -> LaunchRequest:
    return LaunchRequest(
        handle=Handle(job_id, 0),
        command=tuple(command),
        env={},
        workdir=str(workdir),
        time_limit_s=time_limit_s,
        grace_s=2.0,
        allocation=Allocation("ray", ()),
        ranks=ranks,
        backend=BackendRequest(
            name=f"job{job_id}",
            project="vision",
            gpus_per_node=gpus,
            nodes=nodes,
            job_env={"GPUPOOL_JOB_ID": str(job_id)},
        ),
    )


def wait_state(
    backend: Backend, handle: Handle, states: set[RunState], deadline_s: float = RUN_DEADLINE_S
) -> Observation:
    seen: list[Observation] = []

    def reached() -> bool:
        seen.append(backend.poll([handle])[handle])
        return seen[-1].state in states

    wait_for(f"run {handle} in {states}", reached, deadline_s)
    return seen[-1]


def shell(script: str) -> list[str]:
    return ["/bin/sh", "-c", script]


def pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_two_gpu_run_sees_two_distinct_gpus_and_its_env(
    ray_backend: Backend, tmp_path: Path
) -> None:
    out = tmp_path / "seen.json"
    script = (
        f'{PY} -c \'import json,os; json.dump(dict(os.environ), open("{out}", "w"))\';'
        " echo hello from ray"
    )
    req = request(1, shell(script), tmp_path, gpus=2)
    ray_backend.launch(req)
    ray_backend.launch(req)  # repeated (a crash between launch and commit): one run
    obs = wait_state(ray_backend, req.handle, {RunState.EXITED})
    assert obs.exit is not None and obs.exit.exit_code == 0, obs
    assert obs.exit.reason is ExitReason.EXITED
    assert obs.ref == f"ray://127.0.0.1:{ray_backend_port(ray_backend)}/gp-t1-1-0"
    env = json.loads(out.read_text())
    gpus = env["CUDA_VISIBLE_DEVICES"].split(",")
    assert len(gpus) == 2 and len(set(gpus)) == 2, env["CUDA_VISIBLE_DEVICES"]
    assert env["GPUPOOL_JOB_ID"] == "1"
    assert os.path.realpath(env["PWD"]) == os.path.realpath(tmp_path)  # workdir: shared
    chunk = ray_backend.logs(req.handle, 0, 1 << 20)
    assert b"hello from ray" in chunk.data
    assert chunk.offset == len(chunk.data) == chunk.size
    rest = ray_backend.logs(req.handle, chunk.offset, 100)
    assert rest.data == b"" and rest.offset == chunk.offset


def ray_backend_port(backend: Backend) -> int:
    assert isinstance(backend, RayBackend)
    return int(backend.settings.host_port.rsplit(":", 1)[1])


def test_a_failing_run_reports_its_exit_code(ray_backend: Backend, tmp_path: Path) -> None:
    req = request(2, shell("echo failing; exit 3"), tmp_path)
    ray_backend.launch(req)
    obs = wait_state(ray_backend, req.handle, {RunState.EXITED})
    assert obs.exit is not None
    assert (obs.exit.exit_code, obs.exit.reason, obs.exit.signal) == (3, ExitReason.EXITED, None)


def test_a_cancel_stops_the_run_and_its_process(ray_backend: Backend, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    req = request(
        3,
        shell(f"echo $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}; exec sleep 600"),
        tmp_path,
    )
    ray_backend.launch(req)
    wait_state(ray_backend, req.handle, {RunState.RUNNING})
    wait_for("the run's pid file", pid_file.exists, RUN_DEADLINE_S)
    pid = int(pid_file.read_text())
    assert ray_backend.signal(req.handle, StopKind.CANCEL) is True
    obs = wait_state(ray_backend, req.handle, {RunState.EXITED})
    assert obs.exit is not None and obs.exit.reason is ExitReason.CANCELLED
    wait_for(f"the run's process {pid} gone", lambda: pid_gone(pid), 30)
    assert ray_backend.signal(req.handle, StopKind.CANCEL) is False  # over: nothing to stop
    assert ray_backend.signal(Handle(999, 0), StopKind.CANCEL) is False  # never launched


def test_a_run_past_its_time_limit_ends_as_timeout(ray_backend: Backend, tmp_path: Path) -> None:
    req = request(4, ["sleep", "600"], tmp_path, time_limit_s=2.0)
    ray_backend.launch(req)
    obs = wait_state(ray_backend, req.handle, {RunState.EXITED})
    assert obs.exit is not None and obs.exit.reason is ExitReason.TIMEOUT, obs


def test_poll_of_many_runs_is_one_list_jobs_call(ray_backend: Backend, tmp_path: Path) -> None:
    assert isinstance(ray_backend, RayBackend)
    req = request(5, ["true"], tmp_path)
    ray_backend.launch(req)
    wait_state(ray_backend, req.handle, {RunState.EXITED})
    client = ray_backend._connect()
    calls: list[tuple[str, str]] = []
    sent = client._do_request

    def counted(method: str, endpoint: str, **kwargs: object):  # type: ignore[no-untyped-def]
        calls.append((method, endpoint))
        return sent(method, endpoint, **kwargs)

    client._do_request = counted  # type: ignore[method-assign]
    handles = [req.handle, *(Handle(1000 + i, 0) for i in range(500))]
    seen = ray_backend.poll(handles)
    assert calls == [("GET", "/api/jobs/")]
    assert seen[req.handle].state is RunState.EXITED
    assert {seen[h].state for h in handles[1:]} == {RunState.UNLAUNCHED}


def test_a_run_no_live_node_can_hold_waits_saying_so(ray_backend: Backend, tmp_path: Path) -> None:
    """Issue 38: a run asking for 8 GPUs (the head has 4, the worker 2) stays QUEUED in Ray,
    and the detail names the shortfall (8 asked, 4 the largest) instead of Ray's message
    "may be waiting for resources"; a cancel ends it at once (Ray's own stop waits for the
    job's supervisor to start, which it never does here)."""
    req = request(9, ["true"], tmp_path, gpus=8)
    ray_backend.launch(req)
    seen: list[Observation] = []

    def told() -> bool:
        seen.append(ray_backend.poll([req.handle])[req.handle])
        state, detail = seen[-1].state, seen[-1].detail
        return state in {RunState.RUNNING, RunState.EXITED} or "cannot start" in detail

    wait_for("the run's detail names the shortfall", told, RUN_DEADLINE_S)
    assert seen[-1].state is RunState.QUEUED
    assert seen[-1].detail.startswith("asks for 8 GPUs; the largest of its "), seen[-1].detail
    assert "has 4: it cannot start on this Ray cluster" in seen[-1].detail, seen[-1].detail
    assert ray_backend.signal(req.handle, StopKind.CANCEL) is True
    ended = ray_backend.poll([req.handle])[req.handle]
    assert ended.state is RunState.EXITED and ended.exit is not None
    assert (ended.exit.reason, ended.exit.message) == (ExitReason.CANCELLED, STOPPED_WAITING)


def test_a_head_that_never_answers_is_unknown_within_the_deadline(tmp_path: Path) -> None:
    """A head that accepts connections and never answers (a hung dashboard): every call
    gives up at request_timeout_s; poll answers UNKNOWN, launch and signal raise nothing."""
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen(64)
        port = mute.getsockname()[1]
        backend = make_backend(f"http://127.0.0.1:{port}", tmp_path / "state", timeout_s=1.0)
        began = time.monotonic()
        seen = backend.poll([Handle(1, 0), Handle(2, 0)])
        backend.launch(request(1, ["true"], tmp_path))
        assert backend.signal(Handle(1, 0), StopKind.CANCEL) is False
        assert backend.health().reachable is False
        took = time.monotonic() - began
    assert {o.state for o in seen.values()} == {RunState.UNKNOWN}
    assert "cannot be reached" in seen[Handle(1, 0)].detail
    assert took < 15, f"calls to a mute head took {took:.1f} s"


def test_a_gang_over_two_nodes_all_reduces_with_torchrun_ranks(
    ray_backend: Backend, cluster: RayCluster, tmp_path: Path
) -> None:
    pytest.importorskip("torch", reason="torch is not installed: make dist-deps")
    script = (
        "import json, os, torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "t = torch.tensor([float(dist.get_rank())]); dist.all_reduce(t)\n"
        "keys = ('RANK','LOCAL_RANK','WORLD_SIZE','NODE_RANK','MASTER_ADDR','CUDA_VISIBLE_DEVICES')\n"
        "rec = {k: os.environ.get(k) for k in keys}; rec['sum'] = t.item()\n"
        f"json.dump(rec, open(os.path.join({str(tmp_path)!r}, 'rank-%s.json' % dist.get_rank()), 'w'))\n"
        "dist.destroy_process_group()\n"
    )
    (tmp_path / "allreduce.py").write_text(script)
    cluster.wait_workers_joined()  # a worker that gave up joining is started again
    ranks = RankLayout(nproc_per_node=2, nnodes=2)
    req = request(6, [PY, "allreduce.py"], tmp_path, gpus=2, nodes=2, ranks=ranks)
    ray_backend.launch(req)
    obs = wait_state(ray_backend, req.handle, {RunState.EXITED}, deadline_s=300)
    log = ray_backend.logs(req.handle, 0, 1 << 20).data.decode(errors="replace")
    worker_log = cluster.workers[0].log.read_text(errors="replace")[-3000:]
    assert obs.exit is not None and obs.exit.exit_code == 0, f"{log}\n--- worker:\n{worker_log}"
    recs = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in range(4)]
    assert [r["RANK"] for r in recs] == ["0", "1", "2", "3"]
    assert [r["NODE_RANK"] for r in recs] == ["0", "0", "1", "1"]
    assert [r["LOCAL_RANK"] for r in recs] == ["0", "1", "0", "1"]
    assert {r["WORLD_SIZE"] for r in recs} == {"4"}
    assert {r["sum"] for r in recs} == {6.0}
    assert len({r["MASTER_ADDR"] for r in recs}) == 1  # the first bundle's node
    for node in (recs[:2], recs[2:]):  # each node's ranks share their bundle's two GPUs
        devices = {r["CUDA_VISIBLE_DEVICES"] for r in node}
        assert len(devices) == 1 and len(devices.pop().split(",")) == 2
    rank_three = ray_backend.logs(req.handle, 0, 1 << 20, rank=3).data.decode()
    assert rank_three == "" or all("[rank 3] " in line for line in rank_three.splitlines())


def pinned(req: LaunchRequest, pins: tuple[str, ...]) -> LaunchRequest:
    assert req.backend is not None
    return replace(req, backend=replace(req.backend, pinned=pins))


def test_capacity_and_a_run_pinned_to_the_worker(
    ray_backend: Backend, cluster: RayCluster, tmp_path: Path
) -> None:
    """`capacity()` reports the head's 4 GPUs and the worker's 2; both nodes share one IP
    here, so each is pinned by its node id. A one-GPU run pinned to the worker holds a GPU
    there (its job's supervisor, which runs the command, is an actor on the worker), and the
    worker's used GPUs go up while it runs."""
    cluster.wait_workers_joined()
    capacity = ray_backend.capacity()
    assert capacity.known, capacity.problem
    worker, head = sorted(capacity.nodes, key=lambda n: n.gpus)
    assert (worker.gpus, head.gpus, worker.cpus, head.cpus) == (2, 4, 2, 4)
    assert {worker.state, head.state} == {EngineNodeState.UP}
    assert worker.pin != head.pin and all(is_node_id(n.pin) for n in (worker, head))

    def used() -> dict[str, int]:
        now = ray_backend.capacity()
        assert now.known, now.problem
        return {n.pin: n.gpus_used for n in now.nodes}

    req = pinned(request(40, shell("exec sleep 300"), tmp_path, gpus=1), (worker.pin,))
    ray_backend.launch(req)
    wait_state(ray_backend, req.handle, {RunState.RUNNING})
    wait_for("the worker's GPU counted as used", lambda: used()[worker.pin] >= 1, 60)
    assert ray_backend.signal(req.handle, StopKind.CANCEL)
    wait_state(ray_backend, req.handle, {RunState.EXITED})
    wait_for("the worker's GPU free again", lambda: used()[worker.pin] == 0, 60)


def test_two_halves_of_one_gpu_run_at_once_on_one_gpu(
    ray_backend: Backend, cluster: RayCluster, tmp_path: Path
) -> None:
    """Two runs of `gpu_fraction` 0.5 pinned to the worker (2 GPUs) both run at once; each
    entrypoint asks Ray for 0.5 of a GPU, so the worker counts one GPU in use for the two
    (it would be 2 for whole GPUs), and Ray packs them onto one GPU: both see the same one."""
    cluster.wait_workers_joined()
    worker = min(ray_backend.capacity().nodes, key=lambda n: n.gpus)

    def used() -> int:
        now = ray_backend.capacity()
        assert now.known, now.problem
        return next(n.gpus_used for n in now.nodes if n.pin == worker.pin)

    seen = [tmp_path / f"half{i}.json" for i in (0, 1)]
    halves = []
    for job_id, out in zip((50, 51), seen, strict=True):
        dump = (  # whole or absent: written aside, then renamed
            f'import json,os; json.dump(dict(os.environ), open("{out}.part", "w"));'
            f' os.replace("{out}.part", "{out}")'
        )
        req = pinned(request(job_id, shell(f"{PY} -c '{dump}'; exec sleep 300"), tmp_path, 1),
                     (worker.pin,))  # fmt: skip
        assert req.backend is not None
        req = replace(req, backend=replace(req.backend, gpu_fraction=0.5))
        ray_backend.launch(req)
        halves.append(req)
    try:
        for req in halves:
            wait_state(ray_backend, req.handle, {RunState.RUNNING})
        wait_for("both halves' environments", lambda: all(p.exists() for p in seen), 60)
        devices = [json.loads(p.read_text())["CUDA_VISIBLE_DEVICES"] for p in seen]
        assert devices[0] == devices[1] and "," not in devices[0], devices
        wait_for("one GPU in use on the worker for the two halves", lambda: used() == 1, 60)
        assert used() == 1
    finally:
        for req in halves:
            ray_backend.signal(req.handle, StopKind.CANCEL)
    for req in halves:
        wait_state(ray_backend, req.handle, {RunState.EXITED})


def test_a_gang_pinned_to_both_nodes_runs_there(
    ray_backend: Backend, cluster: RayCluster, tmp_path: Path
) -> None:
    """A two-node gang pinned to the worker and the head (by node id: one IP here) is
    placed, each bundle on its node (gang.py's bundle label selectors), and runs."""
    cluster.wait_workers_joined()
    worker, head = sorted(ray_backend.capacity().nodes, key=lambda n: n.gpus)
    req = request(41, shell('echo "node $NODE_RANK up"'), tmp_path, gpus=1, nodes=2)
    ray_backend.launch(pinned(req, (worker.pin, head.pin)))
    obs = wait_state(ray_backend, req.handle, {RunState.EXITED})
    log = ray_backend.logs(req.handle, 0, 1 << 20).data.decode(errors="replace")
    assert obs.exit is not None and obs.exit.exit_code == 0, log
    assert "node 0 up" in log and "node 1 up" in log


def test_zz_head_restarted_mid_run_unknown_while_down_then_gone(
    ray_backend: Backend, cluster: RayCluster, tmp_path: Path
) -> None:
    """Last in the module: the head is killed (SIGKILL to its session) while a run goes on,
    then started again on the same ports. While it is down every poll answers UNKNOWN at
    once; after, the run the new head never saw is EXITED with HEAD_LOST, and a run whose
    launch found the head down is UNLAUNCHED (the engine launches it again)."""
    pid_file = tmp_path / "pid"
    req = request(
        7,
        shell(f"echo $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}; exec sleep 600"),
        tmp_path,
    )
    ray_backend.launch(req)
    wait_state(ray_backend, req.handle, {RunState.RUNNING})
    wait_for("the run's pid file", pid_file.exists, RUN_DEADLINE_S)
    pid = int(pid_file.read_text())
    cluster.kill_head()
    began = time.monotonic()
    down = ray_backend.poll([req.handle])[req.handle]
    assert down.state is RunState.UNKNOWN and down.ref is not None
    late = request(8, ["true"], tmp_path)
    ray_backend.launch(late)  # the head is down: nothing raised, nothing launched
    assert ray_backend.signal(req.handle, StopKind.CANCEL) is False
    assert ray_backend.health().reachable is False
    assert time.monotonic() - began < 10
    cluster.start_head()
    seen = ray_backend.poll([req.handle, late.handle])
    gone = seen[req.handle]
    assert gone.state is RunState.EXITED and gone.exit is not None
    assert (gone.exit.exit_code, gone.exit.message) == (1, HEAD_LOST)
    assert seen[late.handle].state is RunState.UNLAUNCHED
    wait_for(f"the lost run's process {pid} gone", lambda: pid_gone(pid), 60)
    ray_backend.launch(late)  # the engine's relaunch: it runs on the new head
    obs = wait_state(ray_backend, late.handle, {RunState.EXITED})
    assert obs.exit is not None and obs.exit.exit_code == 0
