"""A 1,000-task array, gpupool next to Slurm in one run (issue 35, goal 3): submitting it,
and holding, releasing and cancelling the whole array by its id.

Both sides as bench/vs_slurm.py brings them up: a gpupool daemon of this checkout (SQLite,
a declared 8-GPU inventory) and a real one-node Slurm (bench/slurm_local.py; no slurmdbd).
One job holds all 8 GPUs on each side, so the array's tasks wait. Each round, on each side:
- submit: gpupool's SDK (`Client.submit(Job(..., array="0-999"))` in this process: the
  request alone), `gpupool submit --array 0-999` (a new Python process), and
  `sbatch --array=0-999`; the wall clock of the call;
- hold, release: `gpupool hold ID` / `gpupool release ID` and `scontrol hold ID` /
  `scontrol release ID`; the wall clock of the command (each applies it before it returns);
- cancel: `gpupool cancel ID` and `scancel ID`, each until its queue lists no pending task
  (scancel returns before slurmctld has cancelled them).
The sides take turns, `--rounds` times. Prints one JSON object: each path's walls (p50, min,
max in ms) and the ratios Slurm / gpupool of the p50s (at least 1: gpupool at least as fast);
the goal: a submission at least as fast as `sbatch --array` and hold/release/cancel of the
whole array as cheap as one record.
Usage: python bench/array_ops.py [--tasks 1000] [--rounds 5] [--no-slurm]
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
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from slurm_local import SlurmUnavailable, local_slurm  # noqa: E402
from vs_slurm import (  # noqa: E402
    GPUS,
    MAX_ARRAY_TASKS,
    SLURM_SETTINGS,
    Sides,
    run_header,
    run_ok,
    say,
    started_daemon,
    wait_until,
)

from gpupool import Job  # noqa: E402

OPS = ("submit", "hold", "release", "cancel")


def timed(act: Callable[..., object], *args: object) -> float:
    t0 = time.perf_counter()
    act(*args)
    return time.perf_counter() - t0


def gpupool_round(sides: Sides, indices: str, walls: dict[str, list[float]]) -> None:
    t0 = time.perf_counter()
    array_id = sides.sdk.submit(Job(["true"], gpus=1, workdir=str(sides.work), array=indices)).id
    walls["gpupool_sdk_submit"].append(time.perf_counter() - t0)
    walls["gpupool_cancel"].append(timed(cancel_gpupool, sides, array_id))
    t0 = time.perf_counter()
    array_id = sides.gpupool_cli("--array", indices, "--gpus", "1", "--", "true")
    walls["gpupool_cli_submit"].append(time.perf_counter() - t0)
    for op in ("hold", "release"):
        run = [sys.executable, "-m", "gpupool", op, str(array_id)]
        walls[f"gpupool_{op}"].append(timed(run_ok, run, sides.cli_env, sides.work))
    walls["gpupool_cancel"].append(timed(cancel_gpupool, sides, array_id))


def cancel_gpupool(sides: Sides, array_id: int) -> None:
    run_ok([sys.executable, "-m", "gpupool", "cancel", str(array_id)], sides.cli_env, sides.work)
    wait_until(lambda: sides.gpupool_pending() == 0, "gpupool's array cancelled", 300)


def slurm_round(sides: Sides, indices: str, walls: dict[str, list[float]]) -> None:
    cluster = sides.cluster
    assert cluster is not None
    t0 = time.perf_counter()
    array_id = sides.sbatch(f"--array={indices}", "--gres=gpu:1", "--wrap", "true")
    walls["slurm_submit"].append(time.perf_counter() - t0)
    for op in ("hold", "release"):
        walls[f"slurm_{op}"].append(timed(cluster.run, ["scontrol", op, str(array_id)]))
    walls["slurm_cancel"].append(timed(cancel_slurm, sides, array_id))


def cancel_slurm(sides: Sides, array_id: int) -> None:
    assert sides.cluster is not None
    sides.cluster.run(["scancel", str(array_id)])
    wait_until(lambda: sides.slurm_pending() == 0, "Slurm's array cancelled", 300)


def summary_ms(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values) * 1000, 1),
        "min": round(min(values) * 1000, 1),
        "max": round(max(values) * 1000, 1),
        "n": len(values),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", type=int, default=MAX_ARRAY_TASKS, help="tasks in the array")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--no-slurm", action="store_true", help="measure gpupool alone")
    args = p.parse_args()
    if not 1 <= args.tasks <= MAX_ARRAY_TASKS:
        p.error(f"--tasks: 1 to {MAX_ARRAY_TASKS} (Slurm's MaxArraySize), got {args.tasks}")
    os.environ.pop("GPUPOOL_URL", None)
    config = {"tasks": args.tasks, "rounds": args.rounds, "slurm": SLURM_SETTINGS}
    result = run_header("array_ops", config)
    indices = f"0-{args.tasks - 1}"
    walls: dict[str, list[float]] = {
        f"{side}_{op}": [] for side in ("gpupool", "slurm") for op in ("hold", "release", "cancel")
    }
    walls |= {"gpupool_sdk_submit": [], "gpupool_cli_submit": [], "slurm_submit": []}
    with tempfile.TemporaryDirectory(prefix="gpupool-array-ops-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        say("starting the gpupool daemon and Slurm")
        daemon = started_daemon(stack, work / "pool")
        cluster = None
        if not args.no_slurm:
            try:
                cluster = stack.enter_context(local_slurm(work / "slurm", gpus=GPUS))
            except (SlurmUnavailable, RuntimeError, OSError, subprocess.SubprocessError) as e:
                result["slurm_skipped"] = f"Slurm could not be had: {type(e).__name__}: {e}"[:2000]
        sides = Sides(work, daemon, cluster)
        # One job holds every GPU on each side: the array's tasks wait (none starts).
        sides.gpupool_sdk(["sleep", "3600"], gpus=GPUS)
        if cluster is not None:
            result["versions"]["slurm"] = cluster.run(["sbatch", "--version"]).stdout.strip()
            sides.sbatch(f"--gres=gpu:{GPUS}", "--wrap", "sleep 3600")
        for r in range(args.rounds):
            if cluster is not None:
                slurm_round(sides, indices, walls)
            gpupool_round(sides, indices, walls)
            said = ", ".join(f"{k} {v[-1] * 1000:.0f} ms" for k, v in walls.items() if v)
            say(f"round {r + 1}: {said}")
    result["walls_ms"] = {k: summary_ms(v) for k, v in walls.items() if v}
    if cluster is not None:
        p50 = {k: statistics.median(v) for k, v in walls.items() if v}
        pairs = {
            "submit_sdk": ("slurm_submit", "gpupool_sdk_submit"),
            "submit_cli": ("slurm_submit", "gpupool_cli_submit"),
            "hold": ("slurm_hold", "gpupool_hold"),
            "release": ("slurm_release", "gpupool_release"),
            "cancel": ("slurm_cancel", "gpupool_cancel"),
        }
        ratios = {k: round(p50[s] / p50[g], 3) for k, (s, g) in pairs.items()}
        result["ratios_slurm_over_gpupool_p50"] = ratios
        result["goal_submit_at_least_1"] = ratios["submit_sdk"] >= 1.0
    result["load_after"] = os.getloadavg()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
