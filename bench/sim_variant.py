"""One profile with a changed policy config on the first N Philly jobs: the experiments behind
docs/scheduling-quality.md's "What was tried for load 0.6".

Unlike `gpupool sim --limit N`, which compresses the full trace to the load and then keeps
the first N jobs, this compresses the first N jobs themselves to the load; so its absolute
numbers differ from the CLI's, and only runs of this script compare with each other.

Prints one JSON line. Usage:
    python bench/sim_variant.py LIMIT LOAD SEED '{"reclaim_after_s": 600}'
    python bench/sim_variant.py 20000 0.6 1 '{"policy": "fifo-backfill"}'
    python bench/sim_variant.py 20000 0.6 1 '{"weights": {"size": -1000}}'
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from gpupool.policy.snapshot import PriorityWeights  # noqa: E402
from gpupool.sim.clusters import philly_vcs_cluster  # noqa: E402
from gpupool.sim.engine import SimOptions  # noqa: E402
from gpupool.sim.load import scale_to_load  # noqa: E402
from gpupool.sim.metrics import compute_metrics  # noqa: E402
from gpupool.sim.model import Trace  # noqa: E402
from gpupool.sim.run import SIM_BASE, SimPlan, replay_policy  # noqa: E402
from gpupool.sim.traces import load_trace  # noqa: E402


def main() -> None:
    limit, load, seed = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    changes = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    policy = changes.pop("policy", "default")
    if "weights" in changes:
        changes["weights"] = PriorityWeights(**changes["weights"])
    trace = load_trace("philly", "philly")
    trace = Trace(trace.jobs[:limit], trace.name)
    cluster = philly_vcs_cluster()
    replayed = scale_to_load(trace, cluster.gpus, load)
    base = replace(SIM_BASE, **changes)
    plan = SimPlan(replayed, {"": cluster}, (policy,), SimOptions(seed=seed), base=base)
    began = time.perf_counter()
    m = compute_metrics(replay_policy(plan, policy))
    print(
        json.dumps(
            {
                "policy": policy,
                "changes": sys.argv[4] if len(sys.argv) > 4 else "{}",
                "jobs": limit,
                "load": load,
                "seed": seed,
                "avg_jct_s": round(m["avg_jct_s"], 1),
                "avg_queue_s": round(m["avg_queue_s"], 1),
                "utilization": round(m["utilization"], 5),
                "preemptions": m["preemptions"],
                "lost_gpu_hours": round(m.get("lost_gpu_hours", 0.0), 1),
                "jain_fairness": round(m["jain_fairness"], 3),
                "wall_s": round(time.perf_counter() - began, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
