"""The Slurm backend against a real Slurm (tests/slurm_cluster.py: slurmctld and two slurmd
nodes, n1 and n2, with two fake GPUs each), driven directly: LaunchRequest in, Observations
out. When Slurm cannot be had here the tests skip, which GPUPOOL_REQUIRE_ALL=1 (CI) turns
into failures.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from slurm_cluster import CLUSTER_NAME, SlurmCluster, SlurmUnavailable

from gpupool.backends.slurm import open_backend
from gpupool.backends.slurm.backend import SlurmBackend
from gpupool.core.backends import BackendContext
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

pytestmark = pytest.mark.integration
PY = sys.executable
DEADLINE_S = 120.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    made = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        made.start()
    except SlurmUnavailable as exc:
        made.stop()
        pytest.skip(f"Slurm cannot start here: {exc}")
    try:
        yield made
    finally:
        made.stop()


def make_backend(
    cluster: SlurmCluster, root: Path, name: str = "hpc", **settings: object
) -> SlurmBackend:
    table: dict[str, object] = {
        "kind": "slurm",
        "slurm_conf": str(cluster.conf),
        "output_dir": str(root / "out"),
        "launcher_python": PY,
        "command_timeout_s": 10,
        **settings,
    }
    backend = open_backend(name, table, BackendContext("t1", root / "state"))
    assert isinstance(backend, SlurmBackend)
    return backend


def request(
    cluster: SlurmCluster,
    handle: Handle,
    command: list[str],
    *,
    nodes: int = 1,
    gpus: int = 0,
    time_limit_s: float | None = None,
    distributed: bool = False,
) -> LaunchRequest:
    return LaunchRequest(
        handle=handle,
        command=tuple(command),
        env=dict(cluster.env),  # carries the cluster's token: teardown finds every job
        workdir=str(cluster.workdir),
        time_limit_s=time_limit_s,
        grace_s=2.0,
        allocation=Allocation("hpc", ()),
        ranks=RankLayout(nproc_per_node=gpus, nnodes=nodes) if distributed else None,
        backend=BackendRequest(name="", project="default", gpus_per_node=gpus, nodes=nodes),
    )


def wait_obs(
    backend: SlurmBackend,
    handle: Handle,
    done: Callable[[Observation], bool],
    timeout: float = DEADLINE_S,
) -> Observation:
    deadline = time.monotonic() + timeout
    obs = backend.poll([handle])[handle]
    while not done(obs):
        assert time.monotonic() < deadline, f"run {handle} still {obs} after {timeout}s"
        time.sleep(0.3)
        obs = backend.poll([handle])[handle]
    return obs


def exited(obs: Observation) -> bool:
    return obs.state is RunState.EXITED


def running(obs: Observation) -> bool:
    return obs.state is RunState.RUNNING


@pytest.fixture(scope="module")
def timeout_run(
    cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[SlurmBackend, Handle]]:
    """A run over its 1-minute time limit (Slurm's smallest), started as early as the module
    allows: slurmctld checks limits every 30 s, so it ends 60 to 90 s later."""
    # No checkpoint signal: USR1@120 would reach `sleep` at once (a 1-minute limit) and end
    # it with 138 before its limit (docs/backends.md, "Slurm", "The checkpoint signal").
    backend = make_backend(cluster, tmp_path_factory.mktemp("timeout"), checkpoint_signal="")
    handle = Handle(900, 0)
    backend.launch(request(cluster, handle, ["sleep", "600"], time_limit_s=5))
    yield backend, handle
    backend.signal(handle, StopKind.CANCEL)


@pytest.mark.usefixtures("timeout_run")
def test_two_node_torchrun_all_reduce(cluster: SlurmCluster, tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="torch is not installed: make dist-deps")
    script = tmp_path / "allreduce.py"
    script.write_text(
        "import json, os, sys\n"
        "import torch, torch.distributed as dist\n"
        'dist.init_process_group("gloo")\n'
        "t = torch.tensor([float(dist.get_rank())])\n"
        "dist.all_reduce(t)\n"
        'keys = ("RANK", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", '
        '"SLURMD_NODENAME", "MASTER_ADDR")\n'
        "rec = {k: os.environ.get(k) for k in keys}\n"
        'rec["sum"] = t.item()\n'
        'print("rank", rec["RANK"], "sum", rec["sum"], flush=True)\n'
        'with open(os.path.join(sys.argv[1], "rank-%s.json" % rec["RANK"]), "w") as f:\n'
        "    json.dump(rec, f)\n"
        "dist.destroy_process_group()\n"
    )
    backend = make_backend(cluster, tmp_path)
    h = Handle(1, 0)
    backend.launch(request(cluster, h, [PY, str(script), str(tmp_path)], nodes=2, gpus=2,
                           distributed=True))  # fmt: skip
    obs = wait_obs(backend, h, exited, timeout=300)
    out = backend.logs(h, 0, 1 << 20).data.decode()
    assert obs.exit is not None and obs.exit.exit_code == 0, out
    assert obs.ref is not None and obs.ref.startswith(f"slurm://{CLUSTER_NAME}/")
    recs = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in range(4)]
    for r, rec in enumerate(recs):
        assert rec["RANK"] == str(r)
        assert rec["LOCAL_RANK"] == str(r % 2)
        assert rec["NODE_RANK"] == str(r // 2)
        assert rec["WORLD_SIZE"] == "4" and rec["LOCAL_WORLD_SIZE"] == "2"
        assert rec["sum"] == 6.0  # 0 + 1 + 2 + 3
        assert rec["MASTER_ADDR"] == "127.0.0.1"  # n1's NodeAddr
    assert [rec["SLURMD_NODENAME"] for rec in recs] == ["n1", "n1", "n2", "n2"]
    assert "[rank 3] rank 3 sum 6.0" in out  # every rank's lines, prefixed, in the output
    rank3 = backend.logs(h, 0, 1 << 20, rank=3).data.decode()
    assert "rank 3 sum 6.0" in rank3 and "rank 2" not in rank3


def test_exit_code_and_odd_command_words(cluster: SlurmCluster, tmp_path: Path) -> None:
    backend = make_backend(cluster, tmp_path)
    h = Handle(2, 0)
    odd = "a b; $(touch PWNED) `touch PWNED` 'q' \"d\"\nnext line"
    backend.launch(request(cluster, h, ["sh", "-c", 'printf "%s|" "$1"; exit 3', "sh", odd]))
    backend.launch(request(cluster, h, ["sh", "-c", "exit 9"]))  # a repeat: not submitted
    obs = wait_obs(backend, h, exited)
    assert obs.exit is not None
    assert (obs.exit.exit_code, obs.exit.reason) == (3, ExitReason.EXITED)
    assert backend.logs(h, 0, 1 << 20).data.decode() == odd + "|"
    assert not (cluster.workdir / "PWNED").exists()
    names = cluster.run(["squeue", "-h", "-t", "all", "--name=gp-t1-2-0", "-o", "%i"]).stdout
    assert len(names.split()) == 1  # launched twice, submitted once


def test_cancel_through_the_backend(cluster: SlurmCluster, tmp_path: Path) -> None:
    backend = make_backend(cluster, tmp_path)
    h, p = Handle(3, 0), Handle(4, 0)
    for handle in (h, p):
        backend.launch(request(cluster, handle, ["sleep", "300"]))
    wait_obs(backend, h, running)
    assert backend.signal(h, StopKind.CANCEL)
    assert backend.signal(p, StopKind.PREEMPT)
    obs = wait_obs(backend, h, exited)
    assert obs.exit is not None and obs.exit.reason is ExitReason.CANCELLED
    pre = wait_obs(backend, p, exited)
    assert pre.exit is not None and pre.exit.reason is ExitReason.PREEMPTED
    assert not backend.signal(Handle(99, 0), StopKind.CANCEL)  # never launched


def test_cancelled_by_hand_outside_gpupool(cluster: SlurmCluster, tmp_path: Path) -> None:
    backend = make_backend(cluster, tmp_path)
    h = Handle(5, 0)
    backend.launch(request(cluster, h, ["sleep", "300"]))
    obs = wait_obs(backend, h, running)
    assert obs.ref is not None
    slurm_id = obs.ref.rsplit("/", 1)[1]
    assert cluster.run(["scancel", slurm_id]).returncode == 0
    end = wait_obs(backend, h, exited)
    assert end.exit is not None and end.exit.reason is ExitReason.CANCELLED
    assert end.ref == obs.ref


def test_slurmctld_killed_then_back(cluster: SlurmCluster, tmp_path: Path) -> None:
    backend = make_backend(cluster, tmp_path, command_timeout_s=3)
    a, b = Handle(6, 0), Handle(7, 0)
    backend.launch(request(cluster, a, ["sleep", "300"]))
    backend.launch(request(cluster, b, ["sh", "-c", "exit 4"]))
    before_a = wait_obs(backend, a, running)
    before_b = wait_obs(backend, b, exited)
    # SIGKILL loses what slurmctld has not saved yet: kill it once its state file holds
    # both runs as seen (it saves within seconds of a change), as a real crash would find.
    seen_at = time.time()
    job_state = cluster.workdir / "state" / "job_state"
    cluster.wait_for(lambda: job_state.stat().st_mtime > seen_at, 60, "job state saved")
    cluster.kill_controller()
    try:
        t0 = time.monotonic()
        down = backend.poll([a, b])
        elapsed = time.monotonic() - t0
        assert {o.state for o in down.values()} == {RunState.UNKNOWN}
        assert elapsed < 3 + 5  # the command's deadline, plus a busy machine's slack
        assert not backend.health().reachable
    finally:
        cluster.restart_controller()
    back_a = wait_obs(backend, a, lambda o: o.state is not RunState.UNKNOWN)
    assert (back_a.state, back_a.ref) == (RunState.RUNNING, before_a.ref), back_a
    back_b = backend.poll([b])[b]
    assert back_b == before_b  # the end, exit code 4, as it was
    assert backend.health().reachable
    backend.signal(a, StopKind.CANCEL)
    wait_obs(backend, a, exited)


def test_over_its_time_limit(timeout_run: tuple[SlurmBackend, Handle]) -> None:
    backend, handle = timeout_run
    obs = wait_obs(backend, handle, exited, timeout=200)
    assert obs.exit is not None and obs.exit.reason is ExitReason.TIMEOUT
