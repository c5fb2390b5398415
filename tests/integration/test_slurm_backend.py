"""The Slurm backend against a real Slurm (tests/slurm_cluster.py: slurmctld and two slurmd
nodes, n1 and n2, with two fake GPUs each), driven directly: LaunchRequest in, Observations
out. When Slurm cannot be had here the tests skip, which GPUPOOL_REQUIRE_ALL=1 (CI) turns
into failures.
"""

from __future__ import annotations

import json
import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest
from slurm_cluster import CLUSTER_NAME, SlurmCluster

from gpupool.core.backends import EngineNodeState
from gpupool.core.execution import ExitReason, Handle, RunState, StopKind
from integration.slurm_backend_kit import (
    DEADLINE_S,
    PY,
    catcher,
    exited,
    make_backend,
    request,
    running,
    stubborn,
    wait_obs,
)
from integration.slurm_pool import cluster_fixture  # noqa: F401 (the fixture)

pytestmark = pytest.mark.integration


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


def test_a_cancel_gives_the_runs_own_grace_not_the_clusters_killwait(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    # The test cluster's KillWait is 2 s; the run's grace 6 s. The command ignores SIGTERM.
    backend = make_backend(cluster, tmp_path)
    h = Handle(11, 0)
    backend.launch(request(cluster, h, stubborn(tmp_path), grace_s=6.0))
    cluster.wait_for((tmp_path / "ready").exists, DEADLINE_S, "the command started")
    assert backend.signal(h, StopKind.CANCEL)
    cluster.wait_for((tmp_path / "term").exists, DEADLINE_S, "SIGTERM reached the command")
    assert backend.signal(h, StopKind.CANCEL)  # asked again: the grace goes on, not anew
    obs = wait_obs(backend, h, exited)
    assert obs.exit is not None and obs.exit.reason is ExitReason.CANCELLED
    term = float((tmp_path / "term").read_text())
    last_alive = float((tmp_path / "alive").read_text())
    assert last_alive - term >= 6.0 - 0.5, last_alive - term  # ran on through its grace


def test_a_preempted_run_that_ends_itself_on_sigterm_reads_preempted(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    # It checkpoints and exits 0 in its grace: Slurm says COMPLETED; gpupool must requeue.
    backend = make_backend(cluster, tmp_path)
    h = Handle(12, 0)
    backend.launch(request(cluster, h, catcher(tmp_path, "SIGTERM", end=True), grace_s=30.0))
    cluster.wait_for((tmp_path / "ready").exists, DEADLINE_S, "the command's handler set")
    t0 = time.monotonic()
    assert backend.signal(h, StopKind.PREEMPT)
    obs = wait_obs(backend, h, exited)
    assert obs.exit is not None and obs.exit.reason is ExitReason.PREEMPTED
    assert (tmp_path / "got-SIGTERM").exists()
    assert time.monotonic() - t0 < 30.0  # it ended itself: the grace was not waited out


def test_a_log_read_says_the_logs_size_wherever_it_starts(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    # As the local executor's (tests/unit/test_executor.py): the dashboard starts a tail
    # near the end, asking from past the end for the size.
    backend = make_backend(cluster, tmp_path)
    h = Handle(13, 0)
    assert backend.logs(h, 2**53, 5).size == 0  # no run, no log yet: not 2**53
    backend.launch(request(cluster, h, [PY, "-c", "print('x' * 99)"]))
    wait_obs(backend, h, exited)
    middle, past_the_end = backend.logs(h, 90, 5), backend.logs(h, 2**53, 5)
    assert (middle.data, middle.offset, middle.size) == (b"xxxxx", 95, 100)
    assert (past_the_end.data, past_the_end.offset, past_the_end.size) == (b"", 2**53, 100)


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
    # both runs as seen, as a real crash would find.
    cluster.wait_state_saved()
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


def test_send_signal_reaches_the_commands_handler(cluster: SlurmCluster, tmp_path: Path) -> None:
    """`gpupool cancel --signal USR2`: scancel --batch, to the batch shell, which passes it
    on (the shell itself would have died of it)."""
    backend = make_backend(cluster, tmp_path)
    h = Handle(8, 0)
    assert not backend.send_signal(h, signal.SIGUSR2)  # not launched yet
    backend.launch(request(cluster, h, catcher(tmp_path, "SIGUSR2", end=True)))
    cluster.wait_for((tmp_path / "ready").exists, DEADLINE_S, "the command's handler set")
    assert backend.send_signal(h, signal.SIGUSR2)
    obs = wait_obs(backend, h, exited)
    assert obs.exit is not None and obs.exit.exit_code == 0, backend.logs(h, 0, 1 << 16).data
    assert (tmp_path / "got-SIGUSR2").exists()


def test_stderr_kept_apart(cluster: SlurmCluster, tmp_path: Path) -> None:
    backend = make_backend(cluster, tmp_path)
    h = Handle(9, 0)
    cmd = ["sh", "-c", "echo to-out; echo to-err >&2"]
    backend.launch(request(cluster, h, cmd, separate_stderr=True))
    wait_obs(backend, h, exited)
    assert backend.logs(h, 0, 1 << 16).data == b"to-out\n"
    assert backend.logs(h, 0, 1 << 16, stderr=True).data == b"to-err\n"
    assert backend.logs(h, 3, 2, stderr=True).data == b"er"  # offset and limit


def test_refused_submission_is_spawn_failed(cluster: SlurmCluster, tmp_path: Path) -> None:
    backend = make_backend(cluster, tmp_path, partition="nosuch")
    h = Handle(10, 0)
    backend.launch(request(cluster, h, ["true"]))
    obs = backend.poll([h])[h]
    assert obs.state is RunState.EXITED and obs.exit is not None
    assert obs.exit.reason is ExitReason.SPAWN_FAILED
    assert "invalid partition" in obs.exit.message.lower(), obs.exit.message  # sbatch's words
    backend.launch(request(cluster, h, ["true"]))  # refused once: not submitted again
    assert [c[0] for c in backend.runner.calls].count("sbatch") == 1


def test_capacity_counts_the_gpus_a_run_pinned_to_n2_holds(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    """`capacity()` reports both nodes with their two GPUs; a run pinned to n2 (Slurm alone
    would start it on n1, the first idle node) runs there, and n2's used GPUs go up while it
    runs, down after."""
    backend = make_backend(cluster, tmp_path)
    before = backend.capacity()
    assert before.known, before.problem
    assert [(n.name, n.gpus, n.pin, n.state) for n in before.nodes] == [
        ("n1", 2, "n1", EngineNodeState.UP), ("n2", 2, "n2", EngineNodeState.UP),
    ]  # fmt: skip
    assert all(n.cpus == cluster.cpus_per_node and n.memory_bytes > 0 for n in before.nodes)

    def used_on_n2() -> int:
        capacity = backend.capacity()
        assert capacity.known, capacity.problem
        return {n.name: n.gpus_used for n in capacity.nodes}["n2"]

    h = Handle(40, 0)
    where = tmp_path / "node"
    script = f'echo "$SLURMD_NODENAME" > {where}; exec sleep 300'
    req = request(cluster, h, ["sh", "-c", script], gpus=1)
    assert req.backend is not None
    backend.launch(replace(req, backend=replace(req.backend, pinned=("n2",))))
    wait_obs(backend, h, running)
    cluster.wait_for(lambda: used_on_n2() >= 1, DEADLINE_S, "n2's GPU counted as used")
    cluster.wait_for(where.exists, DEADLINE_S, "the run wrote its node's name")
    assert where.read_text().strip() == "n2"
    assert backend.signal(h, StopKind.CANCEL)
    wait_obs(backend, h, exited)
    cluster.wait_for(lambda: used_on_n2() == 0, DEADLINE_S, "n2's GPU free again")
