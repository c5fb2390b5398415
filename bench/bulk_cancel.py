"""Cancelling 5,000 pending jobs: `gpupool cancel --state PENDING` next to `scancel
--state=PENDING`, in one run (issue 35, goal 5: at least as fast as scancel).

Both sides as bench/vs_slurm.py brings them up: a gpupool daemon of this checkout (SQLite,
a declared 8-GPU inventory) and a real one-node Slurm (bench/slurm_local.py; no slurmdbd).
Each round, on each side, `--jobs` distinct jobs wait (one job holds all 8 GPUs, so none
starts): gpupool's come in `submit_many` batches of 1,000, Slurm's from 8 `sbatch` workers
(5,000 distinct jobs, not an array: an array's pending tasks are one record in Slurm, and
goal 3 measures arrays). Then the cancel is timed as a user waits for it: from the command's
start until the queue lists no pending job (gpupool: the CLI returns once the daemon has
cancelled them all in one transaction; Slurm: scancel returns at once and slurmctld
cancels them, so squeue is polled until none is left). The sides take turns, `--rounds`
times. Prints one JSON object: each side's walls (p50, min, max in s), the ratio
scancel / gpupool (at least 1: the goal holds), the load before and after.
Usage: python bench/bulk_cancel.py [--jobs 5000] [--rounds 3]
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
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from slurm_local import SlurmUnavailable, local_slurm  # noqa: E402
from vs_slurm import GPUS, SLURM_SETTINGS, Sides, run_header, say, started_daemon, wait_until  # noqa: E402

from gpupool.client import ApiError  # noqa: E402

WORKERS = 8  # sbatch processes at once


def fill_gpupool(sides: Sides, jobs: int) -> None:
    """Queue `jobs` (not timed). The daemon's submit rate limit (a burst of 10,000, then 100
    a second) is met by the third round's fill once the rounds run quicker than ~50 s:
    a batch refused for it is sent again a second later."""
    left = jobs
    while left > 0:
        try:
            sides.gpupool_sdk_batch(["true"], min(1000, left))
        except ApiError as exc:
            if exc.code != "rate_limited":
                raise
            time.sleep(1.0)
            continue
        left -= min(1000, left)
    wait_until(lambda: sides.gpupool_pending() >= jobs, "gpupool's jobs queued", 120)


def fill_slurm(sides: Sides, jobs: int) -> None:
    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(lambda _: sides.sbatch("--gres=gpu:1", "--wrap", "true"), range(jobs)))
    wait_until(lambda: sides.slurm_pending() >= jobs, "Slurm's jobs queued", 120)


def cancel_gpupool(sides: Sides) -> float:
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "gpupool", "cancel", "--state", "PENDING"]
    subprocess.run(cmd, env=sides.cli_env, cwd=sides.work, capture_output=True, check=True)
    wait_until(lambda: sides.gpupool_pending() == 0, "gpupool's pending jobs cancelled", 300)
    return time.perf_counter() - t0


def cancel_slurm(sides: Sides) -> float:
    assert sides.cluster is not None
    t0 = time.perf_counter()
    sides.cluster.run(["scancel", "--state=PENDING", "--user", "root"], timeout=300)
    wait_until(lambda: sides.slurm_pending() == 0, "Slurm's pending jobs cancelled", 300)
    return time.perf_counter() - t0


def walls(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "n": len(values),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--jobs", type=int, default=5000, help="pending jobs cancelled per round")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    os.environ.pop("GPUPOOL_URL", None)
    result = run_header(
        "bulk_cancel", {"jobs": args.jobs, "rounds": args.rounds, "slurm": SLURM_SETTINGS}
    )
    gp: list[float] = []
    sl: list[float] = []
    with tempfile.TemporaryDirectory(prefix="gpupool-bulk-cancel-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        say("starting the gpupool daemon and Slurm")
        daemon = started_daemon(stack, work / "pool")
        try:
            cluster = stack.enter_context(local_slurm(work / "slurm", gpus=GPUS))
        except (SlurmUnavailable, RuntimeError, OSError, subprocess.SubprocessError) as e:
            result["skipped"] = f"Slurm could not be had: {type(e).__name__}: {e}"[:2000]
            print(json.dumps(result, indent=2))
            return
        result["versions"]["slurm"] = cluster.run(["sbatch", "--version"]).stdout.strip()
        sides = Sides(work, daemon, cluster)
        # One job holds every GPU on each side: what waits, waits (none starts).
        sides.gpupool_sdk(["sleep", "3600"], gpus=GPUS)
        sides.sbatch(f"--gres=gpu:{GPUS}", "--wrap", "sleep 3600")
        for r in range(args.rounds):
            say(f"round {r + 1}: {args.jobs} pending on each side")
            fill_slurm(sides, args.jobs)
            sl.append(cancel_slurm(sides))
            fill_gpupool(sides, args.jobs)
            gp.append(cancel_gpupool(sides))
            say(f"round {r + 1}: scancel {sl[-1]:.2f} s, gpupool cancel {gp[-1]:.2f} s")
    result["gpupool_cancel_s"] = walls(gp)
    result["scancel_s"] = walls(sl)
    ratio = statistics.median(sl) / statistics.median(gp)
    result["ratio_scancel_over_gpupool_p50"] = round(ratio, 2)
    result["goal_at_least_1"] = ratio >= 1.0
    result["load_after"] = os.getloadavg()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
