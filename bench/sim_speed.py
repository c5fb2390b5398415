"""How long a full replay of the shipped Philly trace (82,247 jobs) takes.

Replays the trace on `philly-vcs` (352 nodes, 2,816 GPUs, one project per VC with its size
as quota) with one profile (default: `default`, what the daemon runs), at the trace's own
load and at the loads given. Baseline in the same run: the same trace through a bare greedy
FIFO event loop written here (GPU counts only, no policy code, no placement): what replaying
through the real `policy.decide` costs over the least a replay can do, printed as the ratio
issue 35's goal 7 sets (at most 25x at load 0.8).

Prints one JSON object. Usage:
    python bench/sim_speed.py [--policy default] [--loads recorded,0.8] [--limit N]
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
import time
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from gpupool.sim.clusters import philly_vcs_cluster  # noqa: E402
from gpupool.sim.engine import SimOptions  # noqa: E402
from gpupool.sim.load import scale_to_load  # noqa: E402
from gpupool.sim.metrics import compute_metrics  # noqa: E402
from gpupool.sim.model import Trace  # noqa: E402
from gpupool.sim.run import SimPlan, replay_policy  # noqa: E402
from gpupool.sim.traces import load_trace  # noqa: E402


def bare_fifo(trace: Trace, gpus: int) -> tuple[float, float]:
    """Strict FIFO on a pool of `gpus` interchangeable GPUs: (average JCT, seconds taken)."""
    began = time.perf_counter()
    free, queue, ends = gpus, deque(), []  # type: ignore[var-annotated]
    jct_sum, i, jobs = 0.0, 0, [j for j in trace.jobs if j.gpus <= gpus]
    while i < len(jobs) or ends or queue:
        now = min(
            jobs[i].submit_s if i < len(jobs) else float("inf"),
            ends[0][0] if ends else float("inf"),
        )
        while ends and ends[0][0] <= now:
            free += heapq.heappop(ends)[1]
        while i < len(jobs) and jobs[i].submit_s <= now:
            queue.append(jobs[i])
            i += 1
        while queue and queue[0].gpus <= free:
            job = queue.popleft()
            free -= job.gpus
            heapq.heappush(ends, (now + job.duration_s, job.gpus))
            jct_sum += now + job.duration_s - job.submit_s
    return jct_sum / max(1, len(jobs)), time.perf_counter() - began


# Issue 35, goal 7: the full Philly replay at load 0.8 at most this many times the bare FIFO
# loop's time in the same run (a ratio holds on machines that differ 2-2.6x in speed).
RATIO_GOAL = 25.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--policy", default="default")
    parser.add_argument("--loads", default="recorded,0.8")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--interval", type=float, default=60.0)
    args = parser.parse_args()

    began = time.perf_counter()
    trace = load_trace("philly", "philly")
    load_s = time.perf_counter() - began
    if args.limit:
        trace = Trace(trace.jobs[: args.limit], trace.name)
    cluster = philly_vcs_cluster()
    runs = []
    for load in args.loads.split(","):
        replayed = trace if load == "recorded" else scale_to_load(trace, cluster.gpus, float(load))
        plan = SimPlan(
            replayed, {"": cluster}, (args.policy,), SimOptions(interval_s=args.interval)
        )
        t0 = time.perf_counter()
        result = replay_policy(plan, args.policy)
        wall = time.perf_counter() - t0
        metrics = compute_metrics(result)
        fifo_jct, fifo_wall = bare_fifo(replayed, cluster.gpus)
        runs.append(
            {
                "load_asked": load,
                "load": round(result.load, 4),
                "jobs": len(replayed.jobs),
                "policy": args.policy,
                "replay_wall_s": round(wall, 2),
                "decide_calls": result.decide_calls,
                "ms_per_decide": round(1000 * wall / max(1, result.decide_calls), 3),
                "avg_jct_s": round(metrics["avg_jct_s"] or 0.0, 1),
                "baseline_bare_fifo_wall_s": round(fifo_wall, 3),
                "baseline_bare_fifo_avg_jct_s": round(fifo_jct, 1),
                # Issue 35, goal 7: the replay over the bare loop, both in this run.
                "ratio_to_bare_fifo": round(wall / max(fifo_wall, 1e-9), 1),
                "at_most": RATIO_GOAL,
                "holds": wall <= RATIO_GOAL * fifo_wall,
            }
        )
    print(
        json.dumps(
            {
                "benchmark": "sim_speed",
                "trace": "philly (shipped, 82,247 jobs)",
                "cluster": f"philly-vcs ({cluster.gpus} GPUs)",
                "interval_s": args.interval,
                "trace_load_s": round(load_s, 3),
                "runs": runs,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
