"""One pool across machines: the pool's policy admits a real Slurm cluster's jobs
(docs/backends.md "One pool across machines", engine/admission.py), through a real daemon.

The cluster is tests/slurm_cluster.py's (two slurmd nodes, n1 and n2, two fake GPUs each);
gpupool.toml gives projects a and b two GPUs each there. What is shown: an over-quota job
that cannot borrow waits in gpupool with `Quota` and never reaches Slurm; a borrower runs
on b's idle GPUs and is reclaimed through Slurm (SIGTERM within its grace, requeued with its
restart count) when b claims them, then admitted again and resumed; a two-node gang is
admitted as one, pinned to both nodes; `usage` counts the backend's GPU-hours; the daemon
SIGKILLed mid-way takes everything back (no run twice, none lost).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster

from integration.pool_harness import wait_for
from integration.slurm_pool import SlurmPool, cluster_fixture, module_pool  # noqa: F401

pytestmark = pytest.mark.integration

QUOTAS = "[backends.hpc.quotas]\na = 2\nb = 2\n[projects.a]\nquota = 0\n[projects.b]\nquota = 0\n"


@pytest.fixture(scope="module", name="pool")
def admitting_pool(
    cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SlurmPool]:
    checkpoints = tmp_path_factory.mktemp("checkpoints")  # both ends reach it: one machine
    toml = f'checkpoint_dir = "{checkpoints}"\n{QUOTAS}'
    yield from module_pool(cluster, tmp_path_factory, toml)


def _slurm_runs(cluster: SlurmCluster, job_id: int) -> list[str]:
    """The names of the pool's Slurm runs of `job_id` (queued, running or ended: sacct
    would need accounting; squeue and the runs still in it suffice while they live)."""
    out = cluster.run(["squeue", "-h", "-o", "%j|%T|%N"]).stdout
    return [line for line in out.splitlines() if f"-{job_id}-" in line.split("|")[0]]


def _until(path: Path, on_term: str = "") -> list[str]:
    """A job that runs until `path` exists; on SIGTERM it runs `on_term`, then exits 143."""
    script = (
        f"trap '{on_term}; exit 143' TERM; "
        f"while [ ! -e {shlex.quote(str(path))} ]; do sleep 0.2; done"
    )
    return ["bash", "-c", script]


def test_quota_borrowing_and_reclaim_through_slurm(
    pool: SlurmPool, cluster: SlurmCluster, tmp_path: Path
) -> None:
    done = tmp_path / "done"
    fixed = ("--backend", "hpc", "--gpus", "2", "--no-preemptible")
    a1 = pool.cli_submit(*fixed, "--project", "a", "--", *_until(done))
    pool.wait_state(a1, "RUNNING", timeout=120)
    # a has its 2 GPUs on hpc: a second job that cannot borrow waits here, never in Slurm.
    a2 = pool.cli_submit(*fixed, "--project", "a", "--", *_until(done))
    waiting = pool.wait_reason(a2, "Quota", timeout=60)
    assert waiting.state.value == "PENDING"
    assert "quota" in pool.cli("why", str(a2), check=True).stdout
    assert _slurm_runs(cluster, a2) == []

    # A borrower of a runs on b's idle GPUs; on SIGTERM it checkpoints (a marker file).
    marks = tmp_path / "marks"
    marks.mkdir()
    keep = f"echo $GPUPOOL_RESTART_COUNT >> {marks}/terms"
    # Each attempt notes itself in its checkpoint directory (the backend's checkpoint_dir):
    # the resumed attempt finds the first one's note there.
    note = (
        f'echo "$GPUPOOL_CHECKPOINT_DIR" > {marks}/dir; mkdir -p "$GPUPOOL_CHECKPOINT_DIR"; '
        'echo $GPUPOOL_RESTART_COUNT >> "$GPUPOOL_CHECKPOINT_DIR/attempts"; '
    )
    command = _until(done, keep)
    borrower = pool.cli_submit(
        "--backend", "hpc", "--gpus", "2", "--preemptible", "--grace", "30s",
        "--project", "a", "--", command[0], command[1], note + command[2],
    )  # fmt: skip
    started = pool.wait_state(borrower, "RUNNING", timeout=120)
    assert started.node is not None and started.node.startswith("hpc/")

    # b claims its quota: the borrower is stopped through Slurm and requeued here.
    b1 = pool.cli_submit("--backend", "hpc", "--gpus", "2", "--project", "b", "--", *_until(done))
    wait_for(lambda: (marks / "terms").exists(), timeout=120, what="the borrower's SIGTERM")
    assert (marks / "terms").read_text().split() == ["0"]
    pool.wait_state(b1, "RUNNING", timeout=180)
    requeued = pool.client.job(borrower)
    assert requeued.state.value == "PENDING" and requeued.restart_count == 1
    history = pool.cli("show", str(borrower), check=True).stdout
    assert "preempt" in history.lower()

    # b's job ends: the borrower is admitted again and resumes as attempt 1.
    pool.cancel(b1)
    again = pool.wait_state(borrower, "RUNNING", timeout=180)
    assert again.restart_count == 1
    attempts = Path((marks / "dir").read_text().strip()) / "attempts"
    assert attempts.parent.name == str(borrower)  # <checkpoint_dir>/<job id>, every attempt
    wait_for(
        lambda: attempts.exists() and attempts.read_text().split() == ["0", "1"],
        timeout=120,
        what="the resumed attempt's note beside the first one's",
    )
    done.touch()
    for job_id in (a1, a2, borrower):
        ended = pool.wait(job_id, timeout=240)
        assert ended.state.value == "SUCCEEDED", pool.cli("show", str(job_id)).stdout
    # `usage` counts a's GPU-hours on hpc: a1's 2 GPUs the whole test, and more.
    first = pool.client.job(a1)
    assert first.start_time is not None and first.end_time is not None
    held = (first.end_time - first.start_time) * 2 / 3600
    usage = json.loads(pool.cli("usage", "--by", "project", "--json", check=True).stdout)
    of_a = next(g for g in usage["rows"] if g["group"] == "a")
    assert held > 0 and of_a["allocated_gpu_hours"] > held
    assert of_a["backend_gpu_hours"] == of_a["allocated_gpu_hours"]  # all of it on hpc


def test_a_two_node_gang_is_admitted_as_one_pinned_to_both_nodes(
    pool: SlurmPool, tmp_path: Path
) -> None:
    out = tmp_path / "nodelist"
    job_id = pool.cli_submit(
        "--backend", "hpc", "--nodes", "2", "--gpus", "1", "--project", "b",
        "--", "bash", "-c", f"echo $SLURM_JOB_NODELIST > {out}",
    )  # fmt: skip
    ended = pool.wait(job_id, timeout=240)
    assert ended.state.value == "SUCCEEDED", pool.cli("show", str(job_id)).stdout
    assert ended.node in ("hpc/n1+n2", "hpc/n2+n1")  # admitted to both, as one
    assert out.read_text().strip() in ("n[1-2]", "n1,n2")  # and Slurm ran it there


def test_a_two_node_torchrun_gang_is_admitted_as_one_and_all_reduces(
    pool: SlurmPool, tmp_path: Path
) -> None:
    script = tmp_path / "allreduce.py"
    script.write_text(
        "import json, os, sys\n"
        "import torch, torch.distributed as dist\n"
        'dist.init_process_group("gloo")\n'
        "t = torch.tensor([float(dist.get_rank())])\n"
        "dist.all_reduce(t)\n"
        'rec = {"rank": dist.get_rank(), "node": os.environ.get("SLURMD_NODENAME"), "sum": t.item()}\n'
        'with open(os.path.join(sys.argv[1], "rank-%d.json" % rec["rank"]), "w") as f:\n'
        "    json.dump(rec, f)\n"
        "dist.destroy_process_group()\n"
    )
    job_id = pool.cli_submit(
        "--backend", "hpc", "--nodes", "2", "--gpus", "1", "--distributed", "torchrun",
        "--project", "b", "--", "python", str(script), str(tmp_path),
    )  # fmt: skip
    ended = pool.wait(job_id, timeout=300)
    assert ended.state.value == "SUCCEEDED", pool.cli("logs", str(job_id)).stdout
    assert ended.node in ("hpc/n1+n2", "hpc/n2+n1")
    recs = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in range(2)]
    assert sorted(r["node"] for r in recs) == ["n1", "n2"]  # one rank on each admitted node
    assert all(r["sum"] == 1.0 for r in recs)  # 0 + 1: the gang ran as one


def test_the_daemon_killed_mid_way_takes_everything_back(
    pool: SlurmPool, cluster: SlurmCluster, tmp_path: Path
) -> None:
    done = tmp_path / "done"
    args = ("--backend", "hpc", "--gpus", "2", "--no-preemptible", "--project", "b")
    first = pool.cli_submit(*args, "--", *_until(done))
    second = pool.cli_submit(*args, "--", *_until(done))
    pool.wait_state(first, "RUNNING", timeout=120)
    pool.wait_reason(second, "Quota", timeout=60)
    pool.kill()
    pool.start()
    assert pool.client.job(first).state.value == "RUNNING"
    assert pool.wait_reason(second, "Quota", timeout=60).state.value == "PENDING"
    assert len(_slurm_runs(cluster, first)) == 1 and _slurm_runs(cluster, second) == []
    done.touch()
    assert pool.wait(first, timeout=180).state.value == "SUCCEEDED"
    assert pool.wait(second, timeout=240).state.value == "SUCCEEDED"


def test_backend_any_starts_on_the_box_when_it_can_else_where_it_starts_first(
    pool: SlurmPool, tmp_path: Path
) -> None:
    done = tmp_path / "done"
    here = pool.cli_submit("--backend", "any", "--gpus", "2", "--", *_until(done))
    on_box = pool.wait_state(here, "RUNNING", timeout=120)
    assert on_box.backend is None  # the pool's machine had room: it started there
    # Project b has a quota on hpc and no backend of its own: its jobs go where they start
    # first (`any`) without saying so.
    away = pool.cli_submit("--gpus", "1", "--project", "b", "--", *_until(done))
    routed = pool.wait_state(away, "RUNNING", timeout=180)
    assert routed.backend == "hpc" and routed.node is not None and routed.node.startswith("hpc/")
    story = pool.cli("show", str(away), check=True).stdout
    assert "routed to backend hpc: it starts there first" in story, story
    done.touch()
    for job_id in (here, away):
        assert pool.wait(job_id, timeout=180).state.value == "SUCCEEDED"
    usage = json.loads(pool.cli("usage", "--by", "backend", "--json", check=True).stdout)
    groups = {g["group"]: g for g in usage["rows"]}
    assert groups["hpc"]["jobs"] >= 1 and groups["local"]["jobs"] >= 1
    hpc = groups["hpc"]  # its GPU-hours are all on the backend, as Slurm timed the run
    ran = pool.client.job(away)  # as long as the pool holds it ran (Slurm's own duration)
    assert ran.start_time is not None and ran.end_time is not None
    held = (ran.end_time - ran.start_time) * len(ran.gpus) / 3600
    assert hpc["allocated_gpu_hours"] >= held - 1e-9  # and the module's other hpc jobs'
    assert hpc["backend_gpu_hours"] == hpc["allocated_gpu_hours"]


def test_the_history_is_replayed_on_the_box_and_the_backend(pool: SlurmPool) -> None:
    """After the tests above ran jobs on hpc: `gpupool sim --trace history` replays them on
    the pool's own 2 GPUs and hpc's 4, each backend decided by a pass of its own."""
    ran = [
        j
        for j in pool.client.jobs(include_finished=True)
        if j.backend == "hpc" and j.start_time is not None and j.end_time is not None
    ]
    assert ran
    out = pool.cli(
        "sim", "--trace", "history", "--compare", "default", "--interval", "0",
        "--estimates", "oracle", "--json", check=True, timeout=120,
    )  # fmt: skip
    got = json.loads(out.stdout)
    assert got["_run"]["capacity_gpus"] == 6  # the box's 2 and hpc's 4
    replayed = got["default"]
    on_box = [
        j
        for j in pool.client.jobs(include_finished=True)
        if j.backend is None and j.start_time is not None and j.end_time is not None
    ]
    assert replayed["jobs"] == len(ran) + len(on_box) and replayed["unfinished"] == 0
