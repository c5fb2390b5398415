"""`gpupool submit` and `gpupool queue` (200 jobs) next to `sbatch` and `squeue`, in one run.

The issue-15 budget: `gpupool submit` returns in at most 80 ms wall (p50) and `gpupool queue`
with 200 jobs in at most 80 ms, on the development machine (2 cores, often busy), as Slurm's
own commands do. Each command is a new process, as a script's loop runs it; the commands
take turns (gpupool, then Slurm, then the next round), so a busy machine slows them alike.

Set-up, the same on both sides:
- gpupool: a daemon of this checkout on a declared 8-GPU inventory in a temporary state
  directory; Slurm: a real one-node cluster brought up by bench/slurm_local.py (8 fake GPUs;
  installed with apt-get when missing and root). If Slurm cannot be had, its side is
  {"skipped": why} and gpupool is measured alone.
- one job holding all 8 GPUs (`sleep 600`), then 199 one-GPU jobs: 200 jobs, 199 pending.
  `queue` lists them (its table shows the first 50 and counts the rest), `queue --limit 200`
  prints all 200 rows as squeue does, `squeue` lists them.
- then `gpupool submit --gpus 1 -- true` and `sbatch --gres=gpu:1 --wrap true`, each
  answered with the new job's id; the jobs wait behind the full node, so no job start
  competes with the timing.
`--tree DIR` (repeatable) times the gpupool commands of other source trees too (e.g. the
baseline: `git archive main src | tar -x -C DIR`), against the same daemon; this checkout
is always measured. Python runs with its bytecode cache, as installed commands do.
Prints one JSON object: min, p50, max and n in ms per command, the floor (`python -c pass`),
the load average before and after, and whether each tree meets the budget.
Usage: python bench/cli_vs_slurm.py [--runs 21] [--tree DIR]... [--no-slurm]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from daemon_scale import Daemon  # noqa: E402
from slurm_local import SlurmCluster, SlurmUnavailable, local_slurm  # noqa: E402

from gpupool.spec import build_spec, spec_to_wire  # noqa: E402

BUDGET_MS = 80.0
JOBS = 200
GPUS = 8


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    """Wall ms of one run of `cmd`; a failed run is an error (a fast failure is no result)."""
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, timeout=120)
    wall = (time.perf_counter() - t0) * 1000
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}: {out.stderr.decode()}")
    return wall


def stats(ms: list[float]) -> dict[str, float]:
    return {
        "min_ms": round(min(ms), 1),
        "p50_ms": round(statistics.median(ms), 1),
        "max_ms": round(max(ms), 1),
        "n": len(ms),
    }


def fill_pool(d: Daemon, workdir: Path) -> None:
    """One job on all the GPUs, then one-GPU jobs up to JOBS (through the API: quick)."""

    def wire(command: list[str], gpus: int) -> Any:
        return spec_to_wire(
            build_spec({"command": command, "gpus": gpus}, default_workdir=str(workdir))
        )

    holder = d.client.submit(wire(["sleep", "600"], GPUS), uuid.uuid4().hex).id
    deadline = time.monotonic() + 60
    while d.client.job(holder).state.value != "RUNNING":
        if time.monotonic() > deadline:
            raise TimeoutError("the job holding the GPUs did not start")
        time.sleep(0.05)
    for _ in range(JOBS - 1):
        d.client.submit(wire(["true"], 1), uuid.uuid4().hex)


def fill_slurm(cluster: SlurmCluster) -> None:
    cluster.sbatch("#!/bin/sh\nsleep 600\n", gres_gpus=GPUS)
    for _ in range(JOBS - 1):
        cluster.sbatch("#!/bin/sh\ntrue\n", gres_gpus=1)
    listed = cluster.run(["squeue", "-h", "-o", "%i"]).stdout.split()
    if len(listed) != JOBS:
        raise RuntimeError(f"squeue lists {len(listed)} jobs, not {JOBS}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=21, help="timed runs of each command")
    p.add_argument("--tree", type=Path, action="append", default=[], help="another source tree")
    p.add_argument("--no-slurm", action="store_true", help="measure gpupool alone")
    args = p.parse_args()
    trees = [ROOT, *(t.resolve() for t in args.tree)]
    result: dict[str, Any] = {
        "benchmark": "cli_vs_slurm",
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "jobs_listed": JOBS,
        "budget_p50_ms": BUDGET_MS,
        "load_before": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory(prefix="gpupool-vs-slurm-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        (work / "pool").mkdir()
        d = Daemon(ROOT, work / "pool")
        d.start()
        stack.callback(d.stop)
        fill_pool(d, work)
        cluster: SlurmCluster | None = None
        if not args.no_slurm:
            try:
                cluster = stack.enter_context(local_slurm(work / "slurm", gpus=GPUS))
                result["slurm_version"] = cluster.run(["sbatch", "--version"]).stdout.strip()
                fill_slurm(cluster)
            except (SlurmUnavailable, RuntimeError, OSError, subprocess.SubprocessError) as e:
                result["slurm"] = {"skipped": f"{type(e).__name__}: {e}"[:2000]}
                cluster = None
        env = {k: v for k, v in d.env.items() if k != "PYTHONDONTWRITEBYTECODE"}

        def gpupool(tree: Path, *words: str) -> Callable[[], float]:
            tree_env = {**env, "PYTHONPATH": str(tree / "src")}
            cmd = [sys.executable, "-m", "gpupool", *words]
            return lambda: timed(cmd, tree_env, work)

        def slurm(*words: str) -> Callable[[], float]:
            assert cluster is not None
            out = (
                ["--output", str(work / "slurm" / "out" / "%j.out")] if words[0] == "sbatch" else []
            )
            return lambda: timed([*words[:1], *out, *words[1:]], cluster.env, work)

        floor = lambda: timed([sys.executable, "-c", "pass"], env, work)  # noqa: E731
        # Queue first (200 jobs), then submit (each adds one job to both sides).
        phases: list[dict[str, Callable[[], float]]] = [
            {
                **{f"{t}|queue": gpupool(t, "queue") for t in trees},
                **{f"{t}|queue_limit_200": gpupool(t, "queue", "--limit", "200") for t in trees},
                **({"slurm|squeue": slurm("squeue")} if cluster else {}),
                "python|pass": floor,
            },
            {
                **{f"{t}|submit": gpupool(t, "submit", "--gpus", "1", "--", "true") for t in trees},
                **({"slurm|sbatch": slurm("sbatch", "--parsable", "--gres=gpu:1", "--wrap", "true")} if cluster else {}),
            },
        ]  # fmt: skip
        walls: dict[str, list[float]] = {}
        for phase in phases:
            for run in phase.values():  # warm-up: bytecode written, caches filled
                run()
            for _ in range(args.runs):
                for name, run in phase.items():
                    walls.setdefault(name, []).append(run())
    result["load_after"] = os.getloadavg()
    result["floor_python_c_pass"] = stats(walls.pop("python|pass"))
    if cluster is not None:
        result["slurm"] = {
            "squeue": stats(walls.pop("slurm|squeue")),
            "sbatch": stats(walls.pop("slurm|sbatch")),
        }
    result["gpupool"] = {}
    for key, ms in walls.items():
        tree, command = key.split("|")
        result["gpupool"].setdefault(tree, {})[command] = stats(ms)
    for measured in result["gpupool"].values():
        measured["meets_budget"] = all(
            measured[c]["p50_ms"] <= BUDGET_MS for c in ("submit", "queue")
        )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
