"""Issue 35 goal 4: one job per request from 8 SDK clients, against `sbatch` from 8 workers,
in alternating rounds of the same run.

Each round queues `--jobs` one-GPU jobs behind a job holding every GPU (so the submit
path alone is measured) on each side: `sbatch --wrap true` from `--clients` worker threads
(each runs the command), and `Client.submit` from `--clients` threads, each its own SDK
client. The sides take turns, and which goes first alternates by round: a slow spell of
the machine falls on both. Each round's ratio is gpupool's jobs a second over Slurm's; the
goal is the median's (at least 2). Also printed: the CPU a submission of the daemon and of
slurmctld, and of the clients.

Usage: python bench/one_job_per_request.py [--rounds 5] [--jobs 800] [--clients 8]
Prints JSON on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from slurm_local import local_slurm  # noqa: E402
from vs_slurm import (  # noqa: E402
    GPUS,
    Sides,
    hold_all_gpus,
    run_header,
    say,
    sdk_per_thread,
    started_daemon,
    timed_batch,
)

GOAL = 2.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5, help="rounds, each side once a round")
    p.add_argument("--jobs", type=int, default=800, help="submissions per side per round")
    p.add_argument("--clients", type=int, default=8, help="SDK clients / sbatch workers")
    args = p.parse_args()
    result = run_header("one_job_per_request", vars(args))
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpupool-goal4-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        say("starting the gpupool daemon and Slurm")
        daemon = started_daemon(stack, work / "pool")
        cluster = stack.enter_context(local_slurm(work / "slurm", gpus=GPUS))
        result["versions"]["slurm"] = cluster.run(["sbatch", "--version"]).stdout.strip()
        sides = Sides(work, daemon, cluster)
        hold_all_gpus(sides)
        rounds = [one_round(sides, r, args) for r in range(args.rounds)]
    result["rounds"] = rounds
    result["summary"] = summary(rounds)
    result["wall_s"] = round(time.monotonic() - began, 1)
    print(json.dumps(result, indent=2))


def one_round(sides: Sides, number: int, args: argparse.Namespace) -> dict[str, Any]:
    assert sides.cluster is not None and sides.daemon.proc is not None
    sdk = sdk_per_thread(sides, args.clients)

    def sbatch(i: int) -> object:
        return sides.sbatch("--gres=gpu:1", "--wrap", "true")

    paths: dict[str, tuple[Callable[[int], object], int]] = {
        "gpupool_sdk": (sdk, sides.daemon.proc.pid),
        "slurm_sbatch": (sbatch, sides.cluster.procs["slurmctld"].pid),
    }
    order = list(paths) if number % 2 == 0 else list(reversed(paths))
    out: dict[str, Any] = {"first": order[0]}
    for name in order:
        submit_one, server_pid = paths[name]
        say(f"round {number + 1}/{args.rounds}: {name}, {args.jobs} jobs")
        measured = timed_batch(submit_one, args.jobs, args.clients, server_pid)
        if name == "gpupool_sdk":
            measured["pending_after"] = sides.gpupool_pending()
            sides.gpupool_cancel_pending()
        else:
            measured["pending_after"] = sides.slurm_pending()
            sides.slurm_cancel_pending()
        out[name] = measured
    out["ratio"] = round(out["gpupool_sdk"]["per_s"] / out["slurm_sbatch"]["per_s"], 2)
    return out


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    def median(side: str, key: str) -> float:
        return round(statistics.median(r[side][key] for r in rounds), 2)

    ratio = round(statistics.median(r["ratio"] for r in rounds), 2)
    return {
        "ratios": [r["ratio"] for r in rounds],
        "ratio_median": ratio,
        "goal": GOAL,
        "holds": ratio >= GOAL,
        "per_s_median": {s: median(s, "per_s") for s in ("gpupool_sdk", "slurm_sbatch")},
        "server_cpu_ms_per_submission_median": {
            s: median(s, "server_cpu_ms_per_submission") for s in ("gpupool_sdk", "slurm_sbatch")
        },
        "clients_cpu_ms_per_submission_median": {
            s: median(s, "clients_cpu_ms_per_submission") for s in ("gpupool_sdk", "slurm_sbatch")
        },
        "errors": sum(r[s]["errors"] for r in rounds for s in ("gpupool_sdk", "slurm_sbatch")),
    }


if __name__ == "__main__":
    main()
