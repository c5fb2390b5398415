"""`gpupool sim`: replay a job trace through named policies and compare them
(docs/simulator.md).

    gpupool sim --trace philly --format philly --cluster philly-vcs --load 0.8 \\
        --compare fifo,fifo-backfill,default --seed 1 --out results/

Nothing is written without --out (metrics.json and the plots go there).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpupool.cli.commands import Offline, Parents, Subparsers

if TYPE_CHECKING:
    from gpupool.sim.drain_windows import SimDrain
    from gpupool.sim.model import Trace
    from gpupool.sim.run import SimPlan

# The profile names, for help and errors; policy/profiles.py is the source (checked by
# tests/unit/test_sim_cli.py). Not imported here: `gpupool queue` builds this parser too.
PROFILE_NAMES = (
    "default", "fifo", "fifo-backfill", "sjf-oracle", "srtf-oracle", "las", "drf", "static",
)  # fmt: skip
# `--trace history`: the pool's own ended jobs, read from its API (cli/sim_history.py).
HISTORY = "history"
# policy.snapshot.WidePlacement's values, for the same reason (checked by the same test file).
WIDE_PLACEMENTS = ("spread", "consolidate")


def register(sub: Subparsers, parents: Parents) -> None:
    p = sub.add_parser(
        "sim",
        parents=[parents.common],  # --url, --state-dir: the pool `--trace history` reads
        help="replay a job trace through scheduling policies and compare them",
        description="Replay a job trace through named scheduling policies on a simulated "
        "cluster, with the daemon's own policy code (docs/simulator.md). Prints the "
        "comparison; writes files (metrics.json, plots) only with --out DIR.",
    )
    p.set_defaults(handler=Offline(run))
    add_arguments(p)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The replay's flags (also bench/vs_helios.py's, which replays the same plan)."""
    p.add_argument(
        "--trace",
        required=True,
        help="trace file, 'philly' for the Philly trace shipped with gpupool, or 'history' for "
        "the jobs this pool ran (read from its API: --url, --state-dir), replayed on its own "
        "GPUs and projects unless --cluster names others",
    )
    p.add_argument("--format", default="philly", choices=["philly", "helios", "csv"])
    p.add_argument(
        "--cluster",
        default=None,
        help="(default: philly-vcs; the pool's own GPUs for --trace history) N or NxG (N nodes of G GPUs, default 8), philly-vcs (one cluster of all Philly "
        "VCs, one project per VC with its size as quota), or an inventory file (YAML)",
    )
    p.add_argument(
        "--isolated-vcs",
        action="store_true",
        help="replay each Philly VC on its own cluster of its size (the Helios setup)",
    )
    p.add_argument(
        "--load",
        type=float,
        help="compress or stretch inter-arrival times so the offered load is this "
        "(GPU-seconds asked per second over capacity); default: the trace's own",
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument("--policy", default=None, help=f"one profile: {', '.join(PROFILE_NAMES)}")
    group.add_argument("--compare", help="several profiles side by side, comma-separated, or 'all'")
    p.add_argument(
        "--wide-placement",
        default="spread",
        choices=WIDE_PLACEMENTS,
        help="a job wider than a node takes the nodes with the most free GPUs first, partly "
        "used or not (spread, default), or whole free nodes only, the remainder of a size "
        "that is not a multiple of the node size on one more node (consolidate: the Helios "
        "artifact's placer, Slurm's --exclusive)",
    )
    p.add_argument("--seed", type=int, default=1, help="seeds the noisy runtime estimates")
    p.add_argument(
        "--estimates",
        default="noisy",
        choices=["oracle", "noisy", "none"],
        help="run-time estimates backfill sees: exact, x U(1,5) per job, or the default limit",
    )
    p.add_argument(
        "--restart-overhead",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="work lost on every restart after a preemption (default 60)",
    )
    p.add_argument(
        "--drain",
        action="append",
        default=[],
        type=sim_drain,
        metavar="NODE[:GPU]@START-END",
        help="replay a maintenance window: the node's GPUs (or one) drained from START to END "
        "after the trace's first submission, e.g. node-003@2d-2d12h (repeatable; "
        "docs/operations.md)",
    )
    p.add_argument(
        "--max-gpus-per-user",
        type=float,
        metavar="N",
        help="a per-user GPU cap in every project (as `gpupool server --max-gpus-per-user`)",
    )
    p.add_argument(
        "--max-jobs-per-user",
        type=int,
        metavar="N",
        help="a per-user cap of running jobs in every project (`--max-jobs-per-user`)",
    )
    p.add_argument(
        "--checkpointing",
        action="store_true",
        help="progress survives preemption (only the restart overhead is lost)",
    )
    p.add_argument(
        "--interval",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="scheduling pass grid in simulated seconds (default 60; 0: a pass at every event)",
    )
    p.add_argument(
        "--since", help="only jobs submitted from this time (philly: 2017-10-01 00:00:00)"
    )
    p.add_argument("--until", help="only jobs submitted up to this time")
    p.add_argument("--limit", type=int, help="only the first N jobs of the trace")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="write metrics.json and the PNG plots there (created if missing); without it "
        "nothing is written, only printed",
    )
    p.add_argument("--no-plots", action="store_true", help="with --out: skip the PNG plots")
    p.add_argument(
        "--json", action="store_true", help="print metrics.json's content instead of tables"
    )
    p.add_argument(
        "--workers",
        type=int,
        help="replays run at once (default: one per CPU, at most one per policy)",
    )


class SimInputError(ValueError):
    """A bad sim argument: printed as one line, exit 2."""


def _policies(args: argparse.Namespace) -> tuple[str, ...]:
    from gpupool.policy.profiles import PROFILES

    if args.compare:
        names = (
            list(PROFILES)
            if args.compare == "all"
            else [n.strip() for n in args.compare.split(",") if n.strip()]
        )
    else:
        names = [args.policy or "default"]
    unknown = [n for n in names if n not in PROFILES]
    if unknown:
        raise SimInputError(f"unknown policy {', '.join(unknown)}; known: {', '.join(PROFILES)}")
    return tuple(dict.fromkeys(names))


def _clusters(args: argparse.Namespace) -> dict[str, Any]:
    from gpupool.sim.clusters import cluster_from_spec, isolated_vc_clusters, philly_vc_sizes
    from gpupool.sim.model import SimCluster

    if args.isolated_vcs:
        return dict(isolated_vc_clusters(philly_vc_sizes()))
    spec = args.cluster or "philly-vcs"
    if Path(spec).suffix in (".yaml", ".yml") or Path(spec).is_file():
        from gpupool.inventory.declared import load_inventory_file

        inventory = load_inventory_file(spec)
        return {"": SimCluster(Path(spec).name, inventory.nodes)}
    return {"": cluster_from_spec(spec)}


def _trace(args: argparse.Namespace, clusters: dict[str, Any]) -> Any:
    """The trace to replay: loaded, without the jobs no cluster can take (counted as skipped,
    before the load is measured: it is the replayed jobs' load), cut and scaled."""
    from gpupool.sim.load import scale_to_load
    from gpupool.sim.model import Trace
    from gpupool.sim.run import replayable
    from gpupool.sim.traces import load_trace

    if args.trace == HISTORY:
        trace = args.history_trace
    else:
        trace = load_trace(args.trace, args.format, since=args.since, until=args.until)
    trace = replayable(trace, clusters)
    capacity = sum(c.gpus for c in clusters.values())
    if args.limit is not None:
        if args.limit <= 0:
            raise SimInputError(f"--limit must be positive: {args.limit}")
        trace = Trace(trace.jobs[: args.limit], trace.name, trace.skipped)
    if not trace.jobs:
        raise SimInputError(f"the trace {args.trace} has no jobs to replay")
    if args.load is not None:
        if not args.load > 0:
            raise SimInputError(f"--load must be more than 0: {args.load}")
        trace = scale_to_load(trace, capacity, args.load)
    return trace


def _history(args: argparse.Namespace) -> dict[str, Any]:
    """The pool's history (kept in `args.history_trace`) and its cluster: the pool's own GPUs,
    or those --cluster names, with the pool's projects either way."""
    from dataclasses import replace

    from gpupool.cli.sim_history import pool_history
    from gpupool.client import Client

    if args.isolated_vcs:
        raise SimInputError("--isolated-vcs replays the Philly VCs, not a pool's history")
    if args.since or args.until:
        raise SimInputError("--since/--until need a trace with dates; history has none here")
    client = Client(getattr(args, "state_dir", None), url=getattr(args, "url", None))
    trace, pool = pool_history(client)
    args.history_trace = trace
    if args.cluster is None:
        return {"": pool}
    other = _clusters(args)[""]
    return {"": replace(other, projects=pool.projects)}


def build_plan(args: argparse.Namespace) -> Any:
    """The `SimPlan` that `gpupool sim` replays for these (parsed) arguments: trace, clusters,
    profiles, options and base config. bench/vs_helios.py replays the same plan to compare
    it job by job. Raises ValueError (SimInputError, TraceError) or OSError on bad input."""
    from dataclasses import replace

    from gpupool.policy.snapshot import WidePlacement
    from gpupool.sim.engine import SimOptions
    from gpupool.sim.run import SIM_BASE, SimPlan

    if args.isolated_vcs and args.cluster not in ("philly-vcs", None):
        raise SimInputError("--isolated-vcs replays the Philly VCs; leave out --cluster")
    if args.interval < 0:
        raise SimInputError(f"--interval must be 0 or more: {args.interval}")
    if args.restart_overhead < 0:
        raise SimInputError(f"--restart-overhead must be 0 or more: {args.restart_overhead}")
    policies = _policies(args)
    if args.trace == HISTORY:
        clusters = _history(args)
    else:
        clusters = _clusters(args)
    trace = _trace(args, clusters)
    options = SimOptions(
        estimates=args.estimates,
        seed=args.seed,
        restart_overhead_s=args.restart_overhead,
        checkpointing=args.checkpointing,
        interval_s=args.interval,
        drains=tuple(args.drain),
    )
    capped = args.max_gpus_per_user is not None or args.max_jobs_per_user is not None
    if capped and not any(j.user for j in trace.jobs):
        raise ValueError(
            "the trace names no users (Philly's job table has none): per-user caps need one "
            "that does (--format helios, a CSV with a user column, --trace history)"
        )
    if options.drains:  # a node or GPU the cluster lacks is said before anything runs
        from gpupool.sim.drain_windows import drain_edges

        if args.isolated_vcs:
            raise ValueError("--drain names nodes of one cluster: not with --isolated-vcs")
        for cluster in clusters.values():
            drain_edges(cluster, options.drains, 0.0)
    base = replace(
        SIM_BASE,
        wide_placement=WidePlacement(args.wide_placement),
        max_gpus_per_user=args.max_gpus_per_user,
        max_running_jobs_per_user=args.max_jobs_per_user,
    )
    return SimPlan(trace, clusters, policies, options, base)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    err = Console(stderr=True)
    loaded = time.perf_counter()
    from gpupool.client import BadClientSetting, PoolUnreachable

    try:
        plan = build_plan(args)
    except (BadClientSetting, PoolUnreachable):
        raise  # worded by cli/main.py, as for every command that asks a pool
    except (ValueError, OSError) as exc:
        print(f"gpupool sim: {exc}", file=sys.stderr)
        return 2
    results = _with_progress(plan, args, err)
    _report(args, plan, results, time.perf_counter() - loaded, err)
    return 0


def _with_progress(plan: Any, args: argparse.Namespace, err: Any) -> dict[str, Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from gpupool.sim.run import run_plan

    columns = (
        TextColumn("{task.description:>14}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(
        *columns, console=err, transient=False, disable=args.json and not err.is_terminal
    ) as bar:
        tasks = {name: bar.add_task(name, total=len(plan.trace.jobs)) for name in plan.policies}

        def progress(name: str, done: int, total: int) -> None:
            bar.update(tasks[name], completed=done, total=total)

        return run_plan(plan, progress, workers=args.workers)


def _report(
    args: argparse.Namespace, plan: Any, results: dict[str, Any], wall: float, err: Any
) -> None:
    import json

    from gpupool.sim.metrics import compute_metrics
    from gpupool.sim.report import (
        comparison_table,
        idle_waiting_table,
        size_table,
        write_metrics_json,
        write_plots,
    )

    metrics = {name: compute_metrics(r) for name, r in results.items()}
    first = next(iter(results.values()))
    meta = {
        "trace": args.trace,
        "format": args.format,
        "cluster": "isolated-vcs" if args.isolated_vcs else _cluster_name(args, plan),
        "capacity_gpus": first.capacity_gpus,
        "load_asked": args.load,
        "load": first.load,
        "seed": args.seed,
        "estimates": args.estimates,
        "restart_overhead_s": args.restart_overhead,
        "checkpointing": args.checkpointing,
        "interval_s": args.interval,
        "wide_placement": args.wide_placement,
        "drains": [
            f"{d.node}{'' if d.gpu is None else f':{d.gpu}'}@{d.start_s:g}-{d.end_s:g}s"
            for d in plan.options.drains
        ],  # fmt: skip
        "max_gpus_per_user": args.max_gpus_per_user,
        "max_jobs_per_user": args.max_jobs_per_user,
        "jobs": len(plan.trace.jobs),
        "skipped": dict(plan.trace.skipped),
        "refused": first.refused,
        "wall_s": round(wall, 2),
    }
    # Files only when asked for: a replay run from anywhere leaves nothing behind by default.
    out = Path(args.out) if args.out else None
    plots: list[Path] = []
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_metrics_json(out / "metrics.json", metrics, meta)
        plots = [] if args.no_plots else write_plots(out, results)
    if args.json:
        print(json.dumps({"_run": meta, **metrics}, indent=2))
        return
    from gpupool.cli.plan.common import print_whole, table_console

    # Piped or redirected output gets the tables' full width; a terminal wraps cells.
    console = table_console()
    skipped = ", ".join(f"{n:,} {why}" for why, n in plan.trace.skipped.items() if n)
    console.print(
        f"[bold]{len(plan.trace.jobs):,} jobs[/] on {first.capacity_gpus:,} GPUs at load "
        f"{first.load:.2f}"
        + (f" (asked {args.load:g})" if args.load is not None else "")
        + (f"; not replayed: {skipped}" if skipped else "")
        + (f"; {first.refused:,} jobs could never run here (refused)" if first.refused else "")
    )
    console.print(load_and_util_text(plan.trace, first.capacity_gpus, first.load))
    print_whole(comparison_table(metrics), console)
    print_whole(size_table(metrics), console)
    print_whole(idle_waiting_table(metrics), console)
    if out is None:
        console.print("no files written: --out DIR writes metrics.json and the plots there")
        return
    console.print(f"metrics: {out / 'metrics.json'}")
    for path in plots:
        console.print(f"plot: {path}")


def _cluster_name(args: argparse.Namespace, plan: SimPlan) -> str:
    if args.cluster is not None:
        return str(args.cluster)
    return str(plan.clusters[""].name) if args.trace == HISTORY else "philly-vcs"


def load_and_util_text(trace: Trace, capacity_gpus: float, load: float) -> str:
    """What the report's load and the table's util measure, with the figures the load was
    computed from (sim/load.py: GPU-seconds asked, a fractional job as one GPU, over
    capacity x the submission span; sim/metrics.py: GPU-seconds held over capacity x the
    makespan). Util can be far below load: work still running after the last submission
    stretches its window and not load's (issue 30, item 23)."""
    from gpupool.core.units import format_duration
    from gpupool.sim.load import gpu_seconds, submit_span

    span = submit_span(trace)
    hours = gpu_seconds(trace) / 3600
    asked = f"{hours:,.0f}" if hours >= 100 else f"{hours:.3g}"
    what = (
        f"load {load:.2f} = {asked} GPU-hours asked / ({capacity_gpus:,g} GPUs x "
        f"{format_duration(span)} from the first submission to the last)"
        if span > 0
        else "load: not defined (every job submitted at the same instant)"
    )
    return (
        f"{what}; util = GPU-hours held / (GPUs x the time from the first submission to the "
        "last end): work still running after the last submission lowers util, not load"
    )


def sim_drain(text: str) -> SimDrain:
    """argparse type of --drain: NODE[:GPU]@START-END, START and END durations after the
    trace's first submission ("0" allowed for START)."""
    from gpupool.core.units import parse_duration
    from gpupool.sim.drain_windows import SimDrain

    where, at, window = text.partition("@")
    start, dash, end = window.partition("-")
    node, colon, gpu = where.partition(":")
    try:
        if not (at and dash and node) or (colon and not gpu.isdigit()):
            raise ValueError("expected NODE[:GPU]@START-END")
        begins = 0.0 if start.strip() in ("0", "0s") else parse_duration(start)
        drain = SimDrain(node, int(gpu) if colon else None, begins, parse_duration(end))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--drain {text!r}: {e}") from None
    if drain.end_s <= drain.start_s:
        raise argparse.ArgumentTypeError(f"--drain {text!r}: END must come after START")
    return drain
