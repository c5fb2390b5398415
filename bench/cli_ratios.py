"""The CLI as ratios measured in one run (issue 35, goals 2 and 6): `gpupool queue` with
10,000 pending over the same command with 200, `queue --all --json` of 10,000 over `squeue`
of 10,000, and `gpupool submit`, `queue` and `--help` over `python -c pass`.

Set-up, in one run:
- three gpupool daemons of this checkout (SQLite, a declared 8-GPU inventory): one holding
  200 pending jobs, one 10,000 (put in their databases before they start and held by a
  `--begin` ten years ahead, as bench/daemon_scale.py does), and an empty one that takes
  the submissions (each waited for until its job has ended, untimed, so that its run does
  not slow the next command);
- a real one-node Slurm (bench/slurm_local.py) holding 10,000 pending jobs (`sbatch --hold`,
  8 workers), for `squeue`; if Slurm cannot be had, its side is {"skipped": why}.
Each command is a new process (as a user runs it, bytecode cached), `--runs` times, the
commands taking turns in each round, so a busy machine slows them alike. Commands:
`python -c pass` (the floor), `gpupool --help` (the `gpupool` command pip installs, as
users run it; `--entry module`: `python -m gpupool`), `gpupool submit --gpus 1 -- true` (on the
empty daemon), `gpupool queue` (on the 200-job daemon), `gpupool queue` and `queue --all
--json` (on the 10,000-job daemon), `squeue` (Slurm's default table of its 10,000).
Prints one JSON object: p50/p99/max per command, the ratios of the goals and whether each
holds (queue_10k / queue_200 <= 1.2; queue_all_json_10k / squeue_10k <= 2; submit, queue
and help over the floor <= 3), the load before and after.
Usage: python bench/cli_ratios.py [--runs 11] [--pending 10000] [--no-slurm] [--entry module]
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
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from daemon_scale import Daemon, summary  # noqa: E402
from slurm_local import SlurmUnavailable, local_slurm  # noqa: E402
from vs_slurm import GPUS, SLURM_SETTINGS, run_header, say, started_daemon, wait_until  # noqa: E402

SMALL = 200
WORKERS = 8
GOALS = {  # name: (numerator, denominator, at most)
    "queue_10k_over_queue_200": ("queue_10k", "queue_200", 1.2),
    "queue_all_json_10k_over_squeue_10k": ("queue_all_json_10k", "squeue_10k", 2.0),
    "submit_over_python": ("submit", "python_c_pass", 3.0),
    "queue_over_python": ("queue_200", "python_c_pass", 3.0),
    "help_over_python": ("help", "python_c_pass", 3.0),
}


def timed(command: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    out = subprocess.run(command, env=env, cwd=cwd, capture_output=True, timeout=600)
    wall = (time.perf_counter() - t0) * 1000
    if out.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command[:5])} exited {out.returncode}: {out.stderr[-400:]!r}"
        )
    return wall


def submitted(command: list[str], env: dict[str, str], cwd: Path, daemon: Daemon) -> float:
    """`gpupool submit --parsable` timed to its answer; then (not timed) until the job has
    ended, so that its run does not slow the next command measured."""
    t0 = time.perf_counter()
    out = subprocess.run(command, env=env, cwd=cwd, capture_output=True, timeout=600, text=True)
    wall = (time.perf_counter() - t0) * 1000
    if out.returncode != 0:
        raise RuntimeError(f"submit exited {out.returncode}: {out.stderr[-400:]}")
    job_id = int(out.stdout.strip())
    wait_until(lambda: daemon.client.job(job_id).state.terminal, f"job {job_id} ended")
    return wall


def cli_command(entry: str) -> list[str]:
    """How each command starts the CLI: the installed `gpupool` script (it imports the tree
    on PYTHONPATH, cli_env's), or `python -m gpupool`."""
    script = Path(sys.executable).parent / "gpupool"
    if entry == "module":
        return [sys.executable, "-m", "gpupool"]
    if not script.is_file():
        sys.exit(
            f"no `gpupool` command beside {sys.executable}: pip install -e . or --entry module"
        )
    return [str(script)]


def cli_env(daemon: Daemon) -> dict[str, str]:
    env = dict(daemon.env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as users run it: with cached bytecode
    env.pop("PYTHONUNBUFFERED", None)  # and with output buffered (a write per line else)
    return env


def fill_slurm(cluster: Any, work: Path, jobs: int) -> None:
    out = work / "slurm-out" / "%j.out"
    cmd = ["sbatch", "--parsable", "--hold", f"--output={out}", "--gres=gpu:1", "--wrap", "true"]

    def one(_: int) -> None:
        subprocess.run(cmd, env=cluster.env, capture_output=True, check=True, timeout=120)

    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(one, range(jobs)))

    def listed() -> int:
        return len(cluster.run(["squeue", "-h", "-o", "%i"]).stdout.split())

    wait_until(lambda: listed() >= jobs, "Slurm's jobs queued", 300)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=11)
    p.add_argument("--pending", type=int, default=10_000)
    p.add_argument("--no-slurm", action="store_true")
    p.add_argument(
        "--entry",
        choices=("script", "module"),
        default="script",
        help="run the CLI as users do, by the `gpupool` command pip installs beside this "
        "Python (default), or as `python -m gpupool` (runpy: ~3 ms more a command)",
    )
    args = p.parse_args()
    os.environ.pop("GPUPOOL_URL", None)
    result = run_header(
        "cli_ratios",
        {
            "runs": args.runs,
            "pending": args.pending,
            "small": SMALL,
            "entry": args.entry,
            "slurm": SLURM_SETTINGS,
        },
    )
    walls: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="gpupool-cli-ratios-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        daemons = {}
        for name, n in (("empty", 0), ("small", SMALL), ("large", args.pending)):
            say(f"filling and starting the {name} daemon ({n} pending)")
            daemons[name] = started_daemon(stack, work / name, n)
        empty, small, large = (cli_env(daemons[n]) for n in ("empty", "small", "large"))
        gp = cli_command(args.entry)
        commands: dict[str, Callable[[], float]] = {
            "python_c_pass": lambda: timed([sys.executable, "-c", "pass"], small, work),
            "help": lambda: timed([*gp, "--help"], small, work),
            "submit": lambda: submitted(
                [*gp, "submit", "--parsable", "--gpus", "1", "--", "true"],
                empty,
                work,
                daemons["empty"],
            ),  # fmt: skip
            "queue_200": lambda: timed([*gp, "queue"], small, work),
            "queue_10k": lambda: timed([*gp, "queue"], large, work),
            "queue_all_json_10k": lambda: timed([*gp, "queue", "--all", "--json"], large, work),
        }
        if not args.no_slurm:
            try:
                cluster = stack.enter_context(local_slurm(work / "slurm", gpus=GPUS))
                say(f"Slurm: {args.pending} held jobs")
                fill_slurm(cluster, work, args.pending)
                senv = cluster.env
                commands["squeue_10k"] = lambda: timed(["squeue"], senv, work)
            except (SlurmUnavailable, RuntimeError, OSError, subprocess.SubprocessError) as e:
                result["slurm"] = {"skipped": f"{type(e).__name__}: {e}"[:2000]}
        for run in commands.values():
            run()  # a warm-up each: caches, the daemon's first answers
        for r in range(args.runs):
            say(f"round {r + 1} of {args.runs}")
            for name, run in commands.items():
                walls.setdefault(name, []).append(run())
    result["commands"] = {name: summary(ms) for name, ms in walls.items()}
    goals: dict[str, Any] = {}
    for goal, (top, bottom, most) in GOALS.items():
        if top in walls and bottom in walls:
            ratio = statistics.median(walls[top]) / statistics.median(walls[bottom])
            goals[goal] = {"ratio_p50": round(ratio, 2), "at_most": most, "holds": ratio <= most}
    result["goals"] = goals
    result["load_after"] = os.getloadavg()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
