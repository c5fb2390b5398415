"""One replay of the first 20,000 Philly jobs on philly-vcs, exactly as `gpupool sim` plans it
(bench/sim_quality.py's runs), with fields of the profile's PolicyConfig changed: what one
rule buys, measured with the rule off (docs/scheduling-quality.md).

    python bench/sim_config.py LOAD SEED PROFILE '{"defragment": false}' [LIMIT] [--checkpointing]
    python bench/sim_config.py 0.8 1 default '{"weights": {"service": 0}}'

Prints one JSON object: average JCT, p99 and average queue, bounded slowdown, preemptions,
GPU-hours lost, the replay's wall time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from gpupool.cli.sim import add_arguments, build_plan  # noqa: E402
from gpupool.sim.metrics import compute_metrics  # noqa: E402
from gpupool.sim.run import replay_policy  # noqa: E402

KEYS = ("avg_jct_s", "p99_queue_s", "avg_queue_s", "avg_bounded_slowdown", "preemptions",
        "lost_gpu_hours")  # fmt: skip


def main() -> None:
    ours = argparse.ArgumentParser()
    ours.add_argument("load")
    ours.add_argument("seed")
    ours.add_argument("profile")
    ours.add_argument("changes", help="JSON: PolicyConfig fields; 'weights' for PriorityWeights")
    ours.add_argument("limit", nargs="?", default="20000")
    ours.add_argument("--checkpointing", action="store_true")
    a = ours.parse_args()
    sim = argparse.ArgumentParser()
    add_arguments(sim)
    args = sim.parse_args(["--trace", "philly", "--format", "philly", "--cluster", "philly-vcs",
                           "--limit", a.limit, "--load", a.load, "--seed", a.seed,
                           "--compare", a.profile])  # fmt: skip
    plan = build_plan(args)
    changes = json.loads(a.changes)
    weights = changes.pop("weights", None)
    base = replace(plan.base, **changes)
    if weights:
        base = replace(base, weights=replace(base.weights, **weights))
    plan = replace(plan, base=base)
    if a.checkpointing:
        plan = replace(plan, options=replace(plan.options, checkpointing=True))
    began = time.perf_counter()
    m = compute_metrics(replay_policy(plan, a.profile))
    out = {k: round(float(m[k]), 2) for k in KEYS}
    print(json.dumps(out | {"wall_s": round(time.perf_counter() - began, 1)}))


if __name__ == "__main__":
    main()
