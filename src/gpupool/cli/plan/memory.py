"""`gpupool plan memory`: training memory per GPU under ZeRO 0-3, and which GPUs hold it.

    gpupool plan memory --params 7.5e9 --gpus 64 --zero 3
    gpupool plan memory --params 7B --gpus 8 --zero 2 --layers 32 --hidden 4096 --heads 32 \\
        --seq 4096 --micro-batch 1 --recompute full --gpu A100-80GB

The arithmetic is gpupool.plan.memory; this module parses flags, resolves GPUs through the
catalog and prints. Nothing heavy is imported at module top: the parser is built for every
gpupool command.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from gpupool.cli.plan.common import named

ACTIVATION_FLAGS = ("layers", "hidden", "seq", "micro_batch", "heads")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params", required=True, help="model parameters: 7.5e9, 7.5B, 350M")
    p.add_argument("--gpus", default="1", help="data-parallel GPUs sharing ZeRO state (default 1)")
    p.add_argument("--zero", default="0", metavar="STAGE", help="ZeRO stage 0-3 (default 0)")
    p.add_argument("--gpu", help="a catalog GPU: show the fewest of it each stage needs")
    p.add_argument(
        "--headroom",
        default="0.9",
        help="usable fraction of GPU memory (CUDA context, fragmentation; default 0.9)",
    )
    act = p.add_argument_group(
        "activations (Korthikanti et al. 2022): either --layers --hidden --seq --micro-batch "
        "(and --heads without recomputation), or a flat --activations-gb; default none"
    )
    act.add_argument("--layers", help="transformer layers L")
    act.add_argument("--hidden", help="hidden size h")
    act.add_argument("--heads", help="attention heads a")
    act.add_argument("--seq", help="sequence length s")
    act.add_argument("--micro-batch", help="micro-batch size b per GPU")
    act.add_argument(
        "--recompute",
        default="none",
        choices=["none", "selective", "full"],
        help="activation recomputation: none (sbh(34 + 5as/h) bytes per layer), selective or "
        "FlashAttention (34 sbh), full (2 sbh); default none",
    )
    act.add_argument("--activations-gb", help="activations per GPU in GB, instead of the formula")


def _count(text: str, flag: str) -> float:
    from gpupool.plan.quantity import PlanError, parse_count

    value = parse_count(text, flag)
    if value <= 0:
        raise PlanError(f"{flag} must be positive, got {text!r}")
    return value


def _whole(text: str, flag: str) -> int:
    from gpupool.plan.quantity import PlanError

    value = _count(text, flag)
    if value != int(value):
        raise PlanError(f"{flag} must be a whole number, got {text!r}")
    return int(value)


def _number(text: str, flag: str) -> float:
    from gpupool.plan.quantity import PlanError

    try:
        value = float(text)
    except ValueError:
        raise PlanError(f"{flag}: not a number: {text!r}") from None
    if not math.isfinite(value):
        raise PlanError(f"{flag}: not a finite number: {text!r}")
    return value


def _activations(args: argparse.Namespace) -> tuple[float, dict[str, Any]]:
    """GB of activations per GPU, and the inputs that produced it."""
    from gpupool.plan.memory import activation_gb
    from gpupool.plan.quantity import PlanError

    given = [f for f in ACTIVATION_FLAGS if getattr(args, f) is not None]
    if args.activations_gb is not None:
        if given:
            flags = ", ".join("--" + f.replace("_", "-") for f in given)
            raise PlanError(f"--activations-gb replaces the formula; drop {flags}")
        value = _number(args.activations_gb, "--activations-gb")
        if value < 0:
            raise PlanError(f"--activations-gb must not be negative, got {value:g}")
        return value, {"activations_gb": value, "source": "--activations-gb"}
    if not given:
        return 0.0, {"activations_gb": 0.0, "source": "not counted"}
    # The heads only enter the attention-score term, which recomputation drops.
    needed = [f for f in ACTIVATION_FLAGS if f != "heads" or args.recompute == "none"]
    missing = [f for f in needed if getattr(args, f) is None]
    if missing:
        flags = ", ".join("--" + f.replace("_", "-") for f in missing)
        raise PlanError(f"the activation estimate also needs {flags} (or give --activations-gb)")
    shape = {f: _whole(getattr(args, f), "--" + f.replace("_", "-")) for f in given}
    value = activation_gb(recompute=args.recompute, **{"heads": 0, **shape})
    return value, {**shape, "recompute": args.recompute, "activations_gb": value}


def _gb(value: float) -> str:
    return f"{value:,.0f}" if value >= 1000 else f"{value:.4g}"


def _human(count: float) -> str:
    """7.5e9 -> '7.5B', as model sizes are spoken."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if count >= scale:
            return f"{count / scale:.4g}{suffix}"
    return f"{count:.4g}"


def _min(n: int | None) -> str:
    return "never" if n is None else f"{n:,}"


def run(args: argparse.Namespace) -> int:
    from gpupool.cli.plan.common import fraction, load_catalog, print_json, print_rich_table
    from gpupool.plan.memory import STAGE_NAMES, STAGE_SHARDS, memory_plan
    from gpupool.plan.quantity import PlanError

    params = _count(args.params, "--params")
    gpus = _whole(args.gpus, "--gpus")
    if args.zero not in ("0", "1", "2", "3"):
        raise PlanError(f"--zero must be a ZeRO stage 0, 1, 2 or 3, got {args.zero!r}")
    stage = int(args.zero)
    headroom = fraction(_number(args.headroom, "--headroom"), "--headroom")
    activations, activation_inputs = _activations(args)

    catalog = load_catalog(args)
    chosen_gpu = named(catalog.gpu, args.gpu, "--gpu").name if args.gpu else None
    gpu_memory = sorted(((g.name, g.memory_gb) for g in catalog.gpus), key=lambda x: (x[1], x[0]))
    plan = memory_plan(params, gpus, stage, activations, gpu_memory, headroom)
    chosen_fit = next((f for f in plan.fits if f.name == chosen_gpu), None)
    fitting = [f.name for f in plan.fits if f.fits]

    assumptions = {
        "bytes_per_param": "16 = 2 bf16/fp16 params + 2 grads + 12 fp32 master/Adam m/v (ZeRO K=12)",
        "units": "GB = 1e9 bytes",
        "headroom": f"{headroom:g} of each GPU's memory is usable",
        "activations": activation_inputs["source"]
        if "source" in activation_inputs
        else f"Korthikanti et al. 2022, recompute={args.recompute}, 16-bit, no tensor parallelism",
        "data_parallel": "activations are per GPU (one micro-batch each), not sharded by ZeRO",
    }
    stage_label = STAGE_NAMES[stage]
    verdict = (
        f"{stage_label} on {gpus:,} GPUs: {plan.gb_per_gpu:,.4g} GB per GPU; "
        f"fits {len(fitting)} of {len(plan.fits)} catalog GPUs at {headroom:g} headroom"
    )
    if chosen_fit is not None:
        needs = ", ".join(f"{k} {_min(v)}" for k, v in chosen_fit.min_gpus.items())
        verdict += f"; fewest {chosen_fit.name} per stage: {needs}"

    if args.json:
        inputs = {
            "params": params,
            "gpus": gpus,
            "zero": stage,
            "gpu": chosen_gpu,
            "headroom": headroom,
            "activations": activation_inputs,
        }
        print_json(
            {
                "inputs": inputs,
                "assumptions": assumptions,
                **plan.__dict__,
                "chosen_gpu": chosen_fit,
                "gpus_that_fit": fitting,
                "verdict": verdict,
            }
        )
    else:
        columns = ["stage", "shards", "params", "grads", "optimizer", "activations", "total"]
        if chosen_fit is not None:
            columns.append(f"min {chosen_fit.name}")
        rows = []
        for s in plan.stages:
            row = [s.name, STAGE_SHARDS[s.stage], _gb(s.params_gb), _gb(s.grads_gb)]
            row += [_gb(s.optimizer_gb), _gb(s.activations_gb), _gb(s.total_gb)]
            if chosen_fit is not None:
                row.append(_min(chosen_fit.min_gpus[s.name]))
            if s.stage == stage:
                row = [f"[bold green]{v}[/]" for v in row]
                row[0] += " [bold green]*[/]"
            rows.append(row)
        print_rich_table(
            f"GB per GPU: {_human(params)} params on {gpus:,} data-parallel GPUs",
            columns,
            rows,
            caption="* the chosen --zero stage; mixed-precision Adam, 16 bytes/param (ZeRO, K=12)",
        )
        fit_rows = []
        for f in plan.fits:
            mark = "yes" if f.fits else "no"
            row = [f.name, f"{f.memory_gb:g}", _gb(f.usable_gb), mark]
            row += [_min(f.min_gpus[name]) for name in STAGE_NAMES.values()]
            if f.name == chosen_gpu:
                row = [f"[bold]{v}[/]" for v in row]
            fit_rows.append(row)
        print_rich_table(
            f"Which GPUs hold {stage_label} on {gpus:,} GPUs; fewest GPUs per stage",
            ["GPU", "memory GB", "usable GB", f"fits {stage_label}"]
            + [f"min {n}" for n in STAGE_NAMES.values()],
            fit_rows,
            caption=f"usable = memory x {headroom:g}; 'never': the unsharded part alone overflows",
        )
        print(verdict)
        print("assumptions: " + "; ".join(f"{k}: {v}" for k, v in assumptions.items()))

    if args.plot:
        from gpupool.cli.plan.common import save_plot

        out = save_plot(args.plot, lambda fig: _draw(fig, plan, chosen_gpu), figsize=(11, 4.5))
        print(f"gpupool plan memory: plot written to {out}", file=sys.stderr)
    return 0


def _memory_lines(plan: Any) -> list[tuple[float, str]]:
    """The catalog GPUs' usable memory as a few labelled levels: sizes within 12% of each other
    share one line, so the labels on a log axis do not overprint."""
    levels: list[tuple[float, list[str]]] = []
    for f in sorted(plan.fits, key=lambda f: f.usable_gb):
        if levels and f.usable_gb <= levels[-1][0] * 1.12:
            levels[-1][1].append(f.name)
        else:
            levels.append((f.usable_gb, [f.name]))
    lines = []
    for usable, names in levels:
        shown = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
        lines.append((usable, f"{shown} ({usable:.0f} GB usable)"))
    return lines


def _draw(fig: Any, plan: Any, chosen_gpu: str | None) -> None:
    """Left: stacked GB per GPU per stage at the chosen N, with the --gpu's usable memory.
    Right: GB per GPU vs N per stage (log-log) with the catalog GPUs' usable memory."""
    from matplotlib.ticker import ScalarFormatter

    from gpupool.plan.memory import ZERO_STAGES, stage_memory

    bars, sweep = fig.subplots(1, 2)
    names = [s.name for s in plan.stages]
    bottom = [0.0] * len(names)
    for part, color in (
        ("params_gb", "tab:blue"),
        ("grads_gb", "tab:orange"),
        ("optimizer_gb", "tab:green"),
        ("activations_gb", "tab:red"),
    ):
        heights = [getattr(s, part) for s in plan.stages]
        if any(heights):
            bars.bar(names, heights, bottom=bottom, color=color, label=part.removesuffix("_gb"))
        bottom = [b + h for b, h in zip(bottom, heights)]
    for x, s in enumerate(plan.stages):
        bars.annotate(f"{s.total_gb:.4g}", (x, s.total_gb), ha="center", va="bottom", fontsize=8)
    chosen = next((f for f in plan.fits if f.name == chosen_gpu), None)
    if chosen is not None:
        bars.axhline(chosen.usable_gb, color="black", linestyle="--", linewidth=1)
        bars.annotate(
            f"{chosen.name}: {chosen.usable_gb:.0f} GB usable",
            (0.99, chosen.usable_gb),
            xycoords=("axes fraction", "data"),
            ha="right",
            va="bottom",
            fontsize=8,
        )
    bars.set_ylabel("GB per GPU")
    bars.set_title(f"{_human(plan.params)} params on {plan.gpus:,} GPUs")
    bars.legend(fontsize=7, loc="upper right")

    counts = sorted({2**k for k in range(0, 13)} | {plan.gpus})
    for s in ZERO_STAGES:
        totals = [stage_memory(plan.params, n, s, plan.activations_gb).total_gb for n in counts]
        sweep.plot(counts, totals, marker=".", label=plan.stages[s].name)
    sweep.axvline(plan.gpus, color="grey", linestyle=":")
    for usable, label in _memory_lines(plan):
        sweep.axhline(usable, color="black", linewidth=0.5, alpha=0.5)
        sweep.annotate(
            label,
            (0.99, usable),
            xycoords=("axes fraction", "data"),
            ha="right",
            va="bottom",
            fontsize=6,
            alpha=0.8,
        )
    sweep.set_xscale("log", base=2)
    sweep.xaxis.set_major_formatter(ScalarFormatter())
    sweep.set_yscale("log")
    sweep.set_xlabel("data-parallel GPUs")
    sweep.set_ylabel("GB per GPU")
    sweep.set_title("GB per GPU vs GPUs, per ZeRO stage")
    sweep.legend(fontsize=7, loc="lower left")
