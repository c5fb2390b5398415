"""`gpupool plan network`: leaf-spine / fat-tree sizing, director switches, rail layouts.

    gpupool plan network --endpoints 216 --radix 36
    gpupool plan network --nodes 128 --nics 8 --radix 64 --rail-optimized
    gpupool plan network --endpoints 216 --radix 36 --director

The arithmetic is gpupool.plan.network; this module parses flags and prints. Nothing heavy is
imported at module top: the parser is built for every gpupool command.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

DEFAULT_RADIX = "64"  # NVIDIA Quantum-2 QM9700 (64 x NDR 400 Gb/s); Spectrum-4 has 64 x 800GbE


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--endpoints", help="ports to connect (GPUs' NICs, servers, storage)")
    p.add_argument("--nodes", help="servers, instead of --endpoints (with --nics)")
    p.add_argument("--nics", help="NICs per server (default 1; 8 with --rail-optimized)")
    p.add_argument("--radix", default=DEFAULT_RADIX, help="ports per switch (default 64)")
    p.add_argument(
        "--oversubscription",
        default="1",
        help="leaf down:up port ratio, 1 = non-blocking, 2 = 2:1 (default 1)",
    )
    p.add_argument("--levels", help="force 1, 2 or 3 switch levels (default: the fewest that fit)")
    p.add_argument(
        "--rail-optimized",
        action="store_true",
        help="NIC i of every server goes to a leaf of rail i (8-GPU servers: 8 rails)",
    )
    p.add_argument(
        "--director",
        action="store_true",
        help="also size the two-level network as one director chassis (line + spine cards)",
    )


def _whole(text: str, flag: str) -> int:
    from gpupool.plan.quantity import PlanError, parse_count

    value = parse_count(text, flag)
    if value != int(value) or value < 1:
        raise PlanError(f"{flag} must be a whole number >= 1, got {text!r}")
    return int(value)


def _ratio(text: str) -> float:
    from gpupool.plan.quantity import PlanError

    try:  # "2", "2.5" or "2:1"
        head, _, tail = text.partition(":")
        value = float(head) / (float(tail) if tail else 1.0)
    except (ValueError, ZeroDivisionError):
        raise PlanError(
            f"--oversubscription: not a ratio: {text!r} (examples: 1, 2, 3:1)"
        ) from None
    if not 1 <= value < float("inf"):
        raise PlanError(f"--oversubscription must be >= 1 (1 = non-blocking), got {text!r}")
    return value


def _design(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    from gpupool.plan.network import plan_fabric, plan_rail_fabric
    from gpupool.plan.quantity import PlanError

    radix = _whole(args.radix, "--radix")
    ratio = _ratio(args.oversubscription)
    levels = None
    if args.levels is not None:
        if args.levels not in ("1", "2", "3"):
            raise PlanError(f"--levels must be 1, 2 or 3, got {args.levels!r}")
        levels = int(args.levels)
    if args.endpoints is not None and (args.nodes is not None or args.nics is not None):
        raise PlanError("--endpoints: give either --endpoints or --nodes and --nics, not both")
    if args.rail_optimized:
        if args.nodes is None:
            raise PlanError("--rail-optimized needs --nodes (and --nics, default 8)")
        nodes, nics = _whole(args.nodes, "--nodes"), _whole(args.nics or "8", "--nics")
        plan = plan_rail_fabric(nodes, nics, radix, ratio, levels)
    else:
        if args.endpoints is not None:
            nodes, nics = _whole(args.endpoints, "--endpoints"), 1
        elif args.nodes is not None:
            nodes, nics = _whole(args.nodes, "--nodes"), _whole(args.nics or "1", "--nics")
        else:
            raise PlanError("--endpoints: say how many (or give --nodes and --nics)")
        plan = plan_fabric(nodes * nics, radix, ratio, levels)
    inputs = {
        "endpoints": nodes * nics,
        "nodes": None if args.endpoints is not None else nodes,
        "nics": None if args.endpoints is not None else nics,
        "radix": radix,
        "oversubscription": ratio,
        "levels": levels,
        "rail_optimized": bool(args.rail_optimized),
        "director": bool(args.director),
    }
    return plan, inputs


def _layers(plan: Any) -> list[list[Any]]:
    """Rows of the design table: each switch layer, its ports, and the cables below it."""
    k = plan.radix
    leaf = "leaf" if not plan.rails else f"leaf ({plan.rails} rails x {plan.leaves_per_rail})"
    rows: list[list[Any]] = [
        [leaf, plan.leaves, plan.leaf_down_ports, plan.leaf_up_ports, plan.endpoint_cables]
    ]
    uplinks = plan.leaves * plan.leaf_up_ports
    if plan.levels == 2:
        rows.append(["spine", plan.spines, k, 0, uplinks])
    elif plan.levels == 3:
        rows.append([f"aggregation ({plan.pods} pods)", plan.aggregation, k // 2, k // 2, uplinks])
        rows.append(["core", plan.core, k, 0, uplinks])
    rows.append(["total", plan.switches, "", "", plan.cables])
    return [[f"{v:,}" if isinstance(v, int) else v for v in row] for row in rows]


def _summary(plan: Any) -> str:
    level_text = {1: "one switch", 2: "two levels (leaf-spine)", 3: "three levels (fat tree)"}
    if plan.levels == 1:
        tiers = "1 switch"
    elif plan.levels == 2:
        tiers = f"{plan.leaves:,} leaves + {plan.spines:,} spines"
    else:
        tiers = (
            f"{plan.pods:,} pods: {plan.leaves:,} leaves + {plan.aggregation:,} aggregation "
            f"+ {plan.core:,} core"
        )
    blocking = (
        "non-blocking" if plan.non_blocking else f"{plan.oversubscription:.3g}:1 oversubscribed"
    )
    ports = (
        ""
        if plan.levels == 1
        else (f" ({plan.leaf_down_ports} down + {plan.leaf_up_ports} up per leaf)")
    )
    return (
        f"{plan.endpoints:,} endpoints on radix-{plan.radix} switches: "
        f"{level_text[plan.levels]}, {tiers} = {plan.switches:,} switches, "
        f"{plan.cables:,} cables, {blocking}{ports}"
    )


def run(args: argparse.Namespace) -> int:
    from gpupool.cli.plan.common import print_json, print_rich_table
    from gpupool.plan.network import max_endpoints, plan_director

    plan, inputs = _design(args)
    ratio = inputs["oversubscription"]
    capacity = {str(n): max_endpoints(plan.radix, n, ratio) for n in (1, 2, 3)}
    non_blocking = {str(n): max_endpoints(plan.radix, n, 1.0) for n in (1, 2, 3)}
    director = plan_director(plan.endpoints, plan.radix) if args.director else None
    summary = _summary(plan)
    assumptions = {
        "leaf_ports": f"up = ceil(k / (1 + ratio)), down = k - up: {plan.leaf_down_ports} + "
        f"{plan.leaf_up_ports}",
        "spines": "ceil(leaves x up / k); each spine reaches every leaf, so at most k leaves",
        "three_levels": "k-ary fat tree (Al-Fares et al. 2008): pods of k/2 leaves, aggregation "
        "k/2 down + k/2 up, core = leaf uplinks / k",
        "cables": "one per endpoint + one per leaf uplink (+ one per aggregation uplink)",
        "radix": f"{plan.radix} ports per switch"
        + (" (default)" if args.radix == DEFAULT_RADIX else ""),
    }
    if plan.rails:
        assumptions["rails"] = f"NIC i of each server to rail i: {plan.rails} rails"

    if args.json:
        print_json(
            {
                "inputs": inputs,
                "assumptions": assumptions,
                **plan.__dict__,
                "max_endpoints_by_levels": capacity,
                "non_blocking_max_endpoints_by_levels": non_blocking,
                "director": director,
                "summary": summary,
            }
        )
    else:
        blocking = "non-blocking" if plan.non_blocking else f"{plan.oversubscription:.3g}:1"
        print_rich_table(
            f"Network for {plan.endpoints:,} endpoints: radix {plan.radix}, {blocking}",
            ["layer", "switches", "ports down", "ports up", "cables below"],
            _layers(plan),
            caption="leaves = ceil(N / down); spines = ceil(leaves x up / k)",
        )
        print_rich_table(
            f"Most endpoints radix-{plan.radix} switches reach",
            ["levels", f"at {ratio:g}:1", "non-blocking", "formula (non-blocking)"],
            [
                [n, f"{capacity[n]:,}", f"{non_blocking[n]:,}", formula]
                for n, formula in (("1", "k"), ("2", "k^2/2"), ("3", "k^3/4"))
            ],
        )
        if director is not None:
            print_rich_table(
                f"As one director chassis of {director.radix}-port chips",
                ["ports", "line cards", "spine cards", "backplane links", "largest"],
                [
                    [
                        director.ports,
                        director.line_cards,
                        director.spine_cards,
                        director.internal_links,
                        director.max_ports,
                    ]
                ],
                caption="line cards: k/2 ports out, k/2 into the backplane; spines = ports / k",
            )
        print(summary)
        print("assumptions: " + "; ".join(f"{k}: {v}" for k, v in assumptions.items()))

    if args.plot:
        from gpupool.cli.plan.common import save_plot

        out = save_plot(args.plot, lambda fig: _draw(fig, plan, ratio))
        print(f"gpupool plan network: plot written to {out}", file=sys.stderr)
    return 0


def _draw(fig: Any, plan: Any, ratio: float) -> None:
    """Switches and cables against endpoints, log-log, up to the three-level limit, with the
    one-, two- and three-level limits marked and this design as a point."""
    from gpupool.plan.network import endpoint_sweep, max_endpoints, plan_fabric

    ax = fig.subplots()
    counts = endpoint_sweep(plan.radix, ratio)
    designs = [plan_fabric(n, plan.radix, ratio) for n in counts]
    ax.plot(counts, [d.switches for d in designs], label="switches (leaves + spines + core)")
    ax.plot(counts, [d.cables for d in designs], label="cables")
    ax.scatter([plan.endpoints], [plan.switches], color="tab:blue", zorder=3)
    ax.scatter([plan.endpoints], [plan.cables], color="tab:orange", zorder=3)
    ax.annotate(
        f"  {plan.endpoints:,}: {plan.switches:,} switches, {plan.cables:,} cables",
        (plan.endpoints, plan.switches),
        fontsize=8,
    )
    for levels, style in ((1, ":"), (2, "--"), (3, "-.")):
        limit = max_endpoints(plan.radix, levels, ratio)
        ax.axvline(limit, color="grey", linestyle=style, linewidth=1)
        ax.annotate(
            f" {levels}-level limit {limit:,}",
            (limit, 0.02),
            xycoords=("data", "axes fraction"),
            rotation=90,
            fontsize=8,
            va="bottom",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("endpoints")
    ax.set_ylabel("count")
    ax.set_title(f"Radix-{plan.radix} switches at {ratio:g}:1: switches and cables vs endpoints")
    ax.legend(loc="upper left")
