"""`--distributed torchrun` through a real daemon, with real torch.distributed (gloo, CPU).

Needs torch (`make dist-deps`, docs/distributed.md); without it these tests skip, which
GPUPOOL_REQUIRE_ALL=1 (CI) turns into failures.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.pool_harness import Pool, wait_for
from integration.shared_pool import end_active_jobs, module_pool_fixture  # noqa: F401

pytest.importorskip("torch", reason="torch is not installed: make dist-deps (docs/distributed.md)")


@pytest.fixture
def pool(module_pool: Pool) -> Iterator[Pool]:
    """One daemon per backend for the module (integration/shared_pool.py): each test looks
    only at its own jobs, and finds every GPU free (the pool is idle again after each)."""
    yield module_pool
    end_active_jobs(module_pool)


PY = sys.executable
ENV_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK",
            "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES")  # fmt: skip

# Each rank: join the gang from the environment (env://, as DDP scripts do), all-reduce
# its rank, write what it saw to OUT/rank-R.json; with a GO file, wait for it first.
ALL_REDUCE = """
import json, os, sys, time
import torch, torch.distributed as dist
out, go = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None
dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.tensor([float(rank)])
dist.all_reduce(t)
print(f"rank says {rank}: sum {t.item():g}", flush=True)
rec = {k: os.environ.get(k) for k in KEYS}
rec.update(sum=t.item(), pid=os.getpid())
with open(os.path.join(out, f"rank-{rank}.json"), "w") as f:
    json.dump(rec, f)
while go and not os.path.exists(go):
    time.sleep(0.05)
dist.destroy_process_group()
""".replace("KEYS", repr(ENV_KEYS))

# Rank 2 exits with 3 once every rank has written its pid; the others wait forever.
RANK_TWO_FAILS = """
import os, sys, time
import torch.distributed as dist
out = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
with open(os.path.join(out, f"pid-{rank}.tmp"), "w") as f:
    f.write(str(os.getpid()))
os.rename(os.path.join(out, f"pid-{rank}.tmp"), os.path.join(out, f"pid-{rank}"))
if rank == 2:
    while len([n for n in os.listdir(out) if n.startswith("pid-") and "tmp" not in n]) < 4:
        time.sleep(0.05)
    sys.exit(3)
while True:
    time.sleep(1)
"""


def _records(out: Path, n: int) -> list[dict[str, object]]:
    return [json.loads((out / f"rank-{r}.json").read_text()) for r in range(n)]


def test_four_ranks_all_reduce_with_torchruns_environment(pool: Pool, tmp_path: Path) -> None:
    script = tmp_path / "allreduce.py"
    script.write_text(ALL_REDUCE)
    job_id = pool.submit(
        "--gpus", "4", "--distributed", "torchrun", "--", PY, str(script), str(tmp_path)
    )
    job = pool.wait(job_id, timeout=180)
    assert job.state == "SUCCEEDED", pool.log(job_id)
    recs = _records(tmp_path, 4)
    gpus = ",".join(str(g) for g in sorted(job.gpus))
    for rank, rec in enumerate(recs):
        assert rec["sum"] == 6.0
        assert rec["RANK"] == rec["LOCAL_RANK"] == str(rank)
        assert rec["WORLD_SIZE"] == rec["LOCAL_WORLD_SIZE"] == "4"
        assert rec["NODE_RANK"] == "0" and rec["MASTER_ADDR"] == "127.0.0.1"
        # As under torchrun: every rank sees all the job's GPUs, LOCAL_RANK picks one.
        assert ",".join(sorted(str(rec["CUDA_VISIBLE_DEVICES"]).split(","))) == gpus
    assert len({rec["MASTER_PORT"] for rec in recs}) == 1
    assert 0 < int(str(recs[0]["MASTER_PORT"])) < 65536
    combined = pool.log(job_id)
    for rank in range(4):
        assert f"[rank {rank}] rank says {rank}: sum 6" in combined


def test_a_failed_rank_stops_the_gang_with_its_exit_code(pool: Pool, tmp_path: Path) -> None:
    script = tmp_path / "fails.py"
    script.write_text(RANK_TWO_FAILS)
    job_id = pool.submit(
        "--gpus",
        "4",
        "--distributed",
        "torchrun",
        "--grace",
        "2s",
        "--",
        PY,
        str(script),
        str(tmp_path),
    )
    job = pool.wait(job_id, timeout=180)
    assert job.state == "FAILED" and job.exit_code == 3, pool.log(job_id)
    pids = [int((tmp_path / f"pid-{r}").read_text()) for r in (0, 1, 3)]

    def gone(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        except FileNotFoundError:
            return True

    wait_for(lambda: all(gone(p) for p in pids), 30, "the other ranks to be gone")
    assert "rank 2 exited with code 3: stopping the other ranks" in pool.log(job_id)


def test_two_distributed_jobs_at_once_get_different_master_ports(
    pool: Pool, tmp_path: Path
) -> None:
    script = tmp_path / "allreduce.py"
    script.write_text(ALL_REDUCE)
    go = tmp_path / "go"
    outs = [tmp_path / "a", tmp_path / "b"]
    ids = []
    for out in outs:
        out.mkdir()
        ids.append(
            pool.submit(
                "--gpus", "2", "--distributed", "torchrun", "--", PY, str(script), str(out), str(go)
            )
        )
    # Both gangs have rendezvoused and hold their ports at the same time.
    wait_for(
        lambda: all((o / f"rank-{r}.json").exists() for o in outs for r in (0, 1)),
        180,
        "both gangs",
    )
    ports = [{rec["MASTER_PORT"] for rec in _records(o, 2)} for o in outs]
    go.touch()
    for job_id in ids:
        assert pool.wait(job_id, timeout=120).state == "SUCCEEDED", pool.log(job_id)
    assert len(ports[0]) == len(ports[1]) == 1 and ports[0] != ports[1]
    assert all(rec["sum"] == 1.0 for o in outs for rec in _records(o, 2))


def test_logs_rank_shows_only_that_ranks_output(pool: Pool, tmp_path: Path) -> None:
    script = tmp_path / "allreduce.py"
    script.write_text(ALL_REDUCE)
    job_id = pool.submit(
        "--gpus", "2", "--distributed", "torchrun", "--", PY, str(script), str(tmp_path)
    )
    assert pool.wait(job_id, timeout=180).state == "SUCCEEDED", pool.log(job_id)
    one = pool.cli("logs", str(job_id), "--rank", "1", check=True).stdout
    assert "rank says 1: sum 1" in one
    assert "rank says 0" not in one and "[rank" not in one  # its own output, as written
    bad = pool.cli("logs", str(job_id), "--rank", "2")
    assert bad.returncode != 0 and "ranks 0..1, not 2" in bad.stderr
    plain = pool.submit("--", PY, "-c", "print('hi')")
    pool.wait(plain)
    bad = pool.cli("logs", str(plain), "--rank", "0")
    assert bad.returncode != 0 and "not distributed" in bad.stderr


def test_distributed_flag_names_its_choices(pool: Pool) -> None:
    proc = pool.cli("submit", "--gpus", "2", "--distributed", "mpi", "--", "true")
    assert proc.returncode == 2
    assert "distributed" in proc.stderr and "torchrun" in proc.stderr and "'mpi'" in proc.stderr


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ddp_vs_dp"


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_the_ddp_example_trains_through_gpupool(pool: Pool, model: str) -> None:
    job_id = pool.submit(
        "--gpus", "2", "--distributed", "torchrun", "--",
        PY, str(EXAMPLE / "train_ddp.py"), "--tiny", "--model", model,
        "--steps", "2", "--samples", "256", "--batch-size", "16",
    )  # fmt: skip
    job = pool.wait(job_id, timeout=180)
    assert job.state == "SUCCEEDED", pool.log(job_id)
    log = pool.log(job_id)
    for rank in (0, 1):
        assert f"[rank {rank}] rank {rank}/2 epoch 0: 2 steps" in log
