"""Every profile on the Philly trace at several loads and seeds: the runs behind
docs/scheduling-quality.md, and the Markdown tables made from them.

Runs, for each load and seed (skipping those already in --out):
    gpupool sim --trace philly --format philly --cluster philly-vcs [--limit N] \\
        --load L --compare all --seed S --out OUT/lL-sS --no-plots --json
then prints one Markdown table per load: each profile's metrics averaged over the seeds
(min-max in brackets where the seeds differ), and the checks the issue asks for.

Usage: python bench/sim_quality.py [--limit 20000 (0: the whole trace)] [--loads 0.6,0.8,0.95] [--seeds 1,2,3]
       [--out sim-quality] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

COLUMNS = (
    ("avg JCT (s)", "avg_jct_s", "{:,.0f}"),
    ("p99 JCT (s)", "p99_jct_s", "{:,.0f}"),
    ("avg queue (s)", "avg_queue_s", "{:,.0f}"),
    ("p99 queue (s)", "p99_queue_s", "{:,.0f}"),
    ("bounded slowdown", "avg_bounded_slowdown", "{:.2f}"),
    ("utilization", "utilization", "{:.4f}"),
    ("Jain", "jain_fairness", "{:.3f}"),
    ("max FTF", "max_ftf", "{:,.1f}"),
    ("preemptions", "preemptions", "{:,.0f}"),
    ("lost GPU-h", "lost_gpu_hours", "{:,.0f}"),
)


def run(args: argparse.Namespace, load: str, seed: str) -> Path:
    target = Path(args.out) / f"l{load}-s{seed}.json"
    if target.exists():
        return target
    cmd = [sys.executable, "-m", "gpupool", "sim", "--trace", "philly", "--format", "philly",
           "--cluster", "philly-vcs", "--load", load, "--compare", "all", "--seed", seed,
           "--workers", str(args.workers), "--out", str(Path(args.out) / f"l{load}-s{seed}"),
           "--no-plots", "--json"]  # fmt: skip
    if args.limit:
        cmd[4:4] = ["--limit", str(args.limit)]
    print("+", " ".join(cmd[1:]), file=sys.stderr)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(out)
    return target


def cell(values: list[float], fmt: str) -> str:
    mean = statistics.fmean(values)
    text = fmt.format(mean)
    lo, hi = min(values), max(values)
    if len(values) > 1 and fmt.format(lo) != fmt.format(hi):
        text += f" [{fmt.format(lo)}-{fmt.format(hi)}]"
    return text


def table(files: list[Path]) -> str:
    runs = [json.loads(f.read_text()) for f in files]
    policies = [k for k in runs[0] if not k.startswith("_")]
    lines = ["| profile | " + " | ".join(c[0] for c in COLUMNS) + " |",
             "|---|" + "---|" * len(COLUMNS)]  # fmt: skip
    for p in policies:
        cells = [cell([float(r[p][key] or 0.0) for r in runs], fmt) for _, key, fmt in COLUMNS]
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    mean = {p: statistics.fmean(r[p]["avg_jct_s"] for r in runs) for p in policies}
    util = {p: statistics.fmean(r[p]["utilization"] for r in runs) for p in policies}
    lines.append("")
    lines.append(
        f"default vs fifo-backfill, average JCT: {mean['default'] / mean['fifo-backfill']:.3f}x "
        f"({'beats' if mean['default'] < mean['fifo-backfill'] else 'does not beat'} it); "
        f"utilization {util['default']:.4f} vs {util['fifo-backfill']:.4f}; "
        f"default vs srtf-oracle: {mean['default'] / mean['srtf-oracle']:.3f}x (aim: <= 1.5x)."
    )
    lines.append("")
    lines.append(goals(runs, policies))
    return "\n".join(lines)


def goals(runs: list[dict[str, Any]], policies: list[str]) -> str:
    """Issue 33's goals for the default, as ratios to LAS (and FIFO+backfill) in these runs."""
    if "las" not in policies:
        return ""

    def mean(p: str, key: str) -> float:
        return statistics.fmean(float(r[p][key] or 0.0) for r in runs)

    bsld = mean("default", "avg_bounded_slowdown") / mean("las", "avg_bounded_slowdown")
    p99 = mean("default", "p99_queue_s") / mean("las", "p99_queue_s")
    jct = mean("default", "avg_jct_s") / min(
        mean("las", "avg_jct_s"), mean("fifo-backfill", "avg_jct_s")
    )
    lost = mean("default", "lost_gpu_hours") / max(mean("las", "lost_gpu_hours"), 1e-9)

    def said(value: float, goal: float) -> str:
        return f"{value:.2f}x ({'met' if value <= goal else 'missed'}: <= {goal}x)"

    return (
        f"Issue 33, default vs LAS: bounded slowdown {said(bsld, 1.2)}; p99 queue "
        f"{said(p99, 1.5)}; average JCT vs the lower of LAS and FIFO+backfill {said(jct, 1.0)}; "
        f"GPU-hours lost {said(lost, 0.2)}."
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=20000)
    parser.add_argument("--loads", default="0.6,0.8,0.95")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--out", default="sim-quality")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    for load in args.loads.split(","):
        files = [run(args, load, seed) for seed in args.seeds.split(",")]
        print(f"\n### Load {load} (seeds {args.seeds})\n")
        print(table(files))


if __name__ == "__main__":
    main()
