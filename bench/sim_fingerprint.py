"""The fingerprint of a full replay of the shipped Philly trace: did a change alter a decision?

A refactor or an optimisation must leave every scheduling decision as it was. This replays
the whole trace on `philly-vcs` with one profile at each load given (passes on the
60 s grid, as `gpupool sim` by default) and prints, per load, a
SHA-256 over every job's (id, first start, end, preemptions), rounded to the microsecond,
with the average JCT beside it. Run it before and after a change (for example from a
`git worktree` of the base commit) and compare the hashes: equal hashes, same schedule.

Prints one JSON object. Usage:
    python bench/sim_fingerprint.py [--policy default] [--loads 0.8] [--limit N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from gpupool.sim.clusters import philly_vcs_cluster  # noqa: E402
from gpupool.sim.engine import SimOptions  # noqa: E402
from gpupool.sim.load import scale_to_load  # noqa: E402
from gpupool.sim.model import JobRecord, Trace  # noqa: E402
from gpupool.sim.run import SimPlan, replay_policy  # noqa: E402
from gpupool.sim.traces import load_trace  # noqa: E402


def fingerprint(records: list[JobRecord]) -> str:
    """One hash over every job's first start, end and preemption count, in id order."""
    digest = hashlib.sha256()
    for r in sorted(records, key=lambda r: r.id):
        start = None if r.first_start_s is None else round(r.first_start_s, 6)
        end = None if r.end_s is None else round(r.end_s, 6)
        digest.update(f"{r.id},{start},{end},{r.preemptions};".encode())
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--policy", default="default")
    parser.add_argument("--loads", default="0.8", help="comma-separated; 'recorded' as traced")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--interval", type=float, default=60.0, help="as `gpupool sim` (60)")
    args = parser.parse_args()

    trace = load_trace("philly", "philly")
    if args.limit:
        trace = Trace(trace.jobs[: args.limit], trace.name)
    cluster = philly_vcs_cluster()
    runs = []
    for load in args.loads.split(","):
        replayed = trace if load == "recorded" else scale_to_load(trace, cluster.gpus, float(load))
        plan = SimPlan(
            replayed, {"": cluster}, (args.policy,), SimOptions(interval_s=args.interval)
        )
        began = time.perf_counter()
        result = replay_policy(plan, args.policy)
        done = [r.jct_s for r in result.records if r.jct_s is not None]
        runs.append(
            {
                "load": load,
                "jobs": len(result.records),
                "fingerprint": fingerprint(result.records),
                "avg_jct_s": round(sum(done) / max(1, len(done)), 1),
                "preemptions": sum(r.preemptions for r in result.records),
                "replay_wall_s": round(time.perf_counter() - began, 1),
            }
        )
    print(json.dumps({"policy": args.policy, "interval_s": args.interval, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
