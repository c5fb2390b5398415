"""`gpupool plan train`: training time, cost and energy, or a compute-optimal model for a budget.

    gpupool plan train --params 175e9 --tokens 300e9 --gpus 1024 --gpu A100-80GB --mfu 0.4
    gpupool plan train --params 70B                      # the compute-optimal tokens, and time
    gpupool plan train --budget-flops 5.88e23            # Chinchilla-optimal N and D
    gpupool plan train --gpus 256 --days 30 --gpu H100-SXM   # the same, from GPUs x days

Modes: --params with --tokens is the time mode; --params alone takes the compute-optimal tokens
(20 per parameter); --budget-flops, or --gpus with --days, is the budget mode. The arithmetic is
gpupool.plan.train; nothing heavy is imported at module top (the parser is built for every
gpupool command).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gpupool.cli.plan.common import named

DEFAULT_GPU = "A100-80GB"
DEFAULT_MFU = 0.4  # a well-tuned large run; GPT-3-era runs sustained about 20-30%
SWEEP_MFUS = (0.2, 0.3, 0.4, 0.5, 0.6)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params", help="model parameters N: 175e9, 175B, 350M")
    p.add_argument("--tokens", help="training tokens D: 300e9, 300B, 1.4T")
    p.add_argument("--gpus", help="GPUs training together (default 1)")
    p.add_argument("--days", help="with --gpus and no --params: the budget is GPUs x days")
    p.add_argument("--budget-flops", help="a compute budget C in FLOPs: 5.88e23")
    p.add_argument("--gpu", help=f"catalog GPU for the peak and TDP (default {DEFAULT_GPU})")
    p.add_argument(
        "--precision",
        default="bf16",
        choices=["bf16", "fp16", "fp32"],
        help="which dense peak of --gpu to use (default bf16; falls back to fp16 where no bf16)",
    )
    p.add_argument("--peak-tflops", help="dense peak TFLOPS per GPU, instead of --gpu")
    p.add_argument("--mfu", help=f"model FLOPs utilization, (0, 1] (default {DEFAULT_MFU})")
    p.add_argument("--usd-per-gpu-hour", help="price per GPU-hour, for the cost")
    p.add_argument("--cloud-instance", help="a catalog cloud price: its $/h over its GPUs")
    p.add_argument("--tdp-w", help="board power per GPU in W for energy (default: the catalog's)")
    p.add_argument(
        "--tokens-per-param",
        default="20",
        help="compute-optimal tokens per parameter (Chinchilla: about 20)",
    )


def _given(args: argparse.Namespace, *names: str) -> list[str]:
    return ["--" + n.replace("_", "-") for n in names if getattr(args, n) is not None]


def _positive(text: str, flag: str) -> float:
    from gpupool.plan.quantity import PlanError, parse_count

    value = parse_count(text, flag)
    if not value > 0:
        raise PlanError(f"{flag} must be positive, got {text!r}")
    return value


def _whole(text: str, flag: str) -> int:
    from gpupool.plan.quantity import PlanError

    value = _positive(text, flag)
    if value != int(value):
        raise PlanError(f"{flag} must be a whole number, got {text!r}")
    return int(value)


def _mode(args: argparse.Namespace) -> str:
    """'time', 'optimal-tokens' or 'budget'; anything ambiguous is a PlanError naming flags."""
    from gpupool.plan.quantity import PlanError

    if args.budget_flops is not None:
        clash = _given(args, "params", "tokens", "days")
        if clash:
            raise PlanError(f"--budget-flops is the budget mode; drop {', '.join(clash)}")
        return "budget"
    if args.days is not None:
        clash = _given(args, "params", "tokens")
        if clash:
            raise PlanError(
                f"--days sets a budget of GPUs x days; drop {', '.join(clash)} "
                "(for the time a model takes, give --params and --tokens)"
            )
        if args.gpus is None:
            raise PlanError("--days needs --gpus: the budget is GPUs x days")
        return "budget"
    if args.tokens is not None and args.params is None:
        raise PlanError("--tokens needs --params (for a compute-optimal size give --budget-flops)")
    if args.params is None:
        raise PlanError(
            "say what to plan: --params and --tokens (time), --params (compute-optimal tokens), "
            "--budget-flops, or --gpus with --days"
        )
    return "time" if args.tokens is not None else "optimal-tokens"


def _hardware(args: argparse.Namespace) -> dict[str, Any]:
    """Peak TFLOPS, TDP and $/GPU-hour, from the flags or the catalog, with where each came from."""
    from gpupool.cli.plan.common import fraction
    from gpupool.plan.quantity import PlanError

    for a, b in (("gpu", "peak_tflops"), ("usd_per_gpu_hour", "cloud_instance")):
        if getattr(args, a) is not None and getattr(args, b) is not None:
            raise PlanError(f"--{a.replace('_', '-')} and --{b.replace('_', '-')} clash; give one")
    mfu = DEFAULT_MFU if args.mfu is None else fraction(_positive(args.mfu, "--mfu"), "--mfu")
    hw: dict[str, Any] = {"mfu": mfu}
    cloud = gpu = None
    needs_catalog = args.peak_tflops is None or args.cloud_instance or args.gpu
    catalog = None
    if needs_catalog:
        from gpupool.cli.plan.common import load_catalog

        catalog = load_catalog(args)
    if args.cloud_instance:
        assert catalog is not None
        cloud = named(catalog.cloud, args.cloud_instance, "--cloud-instance")
        cloud_gpu = catalog.gpu(cloud.gpu)
        if args.gpu and named(catalog.gpu, args.gpu, "--gpu").name != cloud_gpu.name:
            raise PlanError(
                f"--cloud-instance {cloud.name} has {cloud_gpu.name} GPUs, but --gpu says {args.gpu}"
            )
        gpu = cloud_gpu
        hw["usd_per_gpu_hour"] = cloud.usd_per_hour / cloud.gpus
        hw["price_source"] = f"{cloud.name}: ${cloud.usd_per_hour:g}/h over {cloud.gpus} GPUs"
    elif args.usd_per_gpu_hour is not None:
        hw["usd_per_gpu_hour"] = _positive(args.usd_per_gpu_hour, "--usd-per-gpu-hour")
        hw["price_source"] = "--usd-per-gpu-hour"
    else:
        hw["usd_per_gpu_hour"] = None
        hw["price_source"] = "none given: no cost"
    if args.peak_tflops is not None:
        hw["peak_tflops"] = _positive(args.peak_tflops, "--peak-tflops")
        hw["gpu"], hw["peak_source"] = None, "--peak-tflops"
        hw["tdp_w"] = None
    else:
        assert catalog is not None
        if gpu is None:
            gpu = named(catalog.gpu, args.gpu or DEFAULT_GPU, "--gpu")
        hw["gpu"] = gpu.name
        hw["peak_tflops"] = gpu.peak_tflops(args.precision)
        hw["peak_source"] = f"catalog {gpu.name}, dense {args.precision}" + (
            "" if args.gpu or cloud else " (default GPU)"
        )
        hw["tdp_w"] = gpu.tdp_w
    if args.tdp_w is not None:
        hw["tdp_w"] = _positive(args.tdp_w, "--tdp-w")
    return hw


def run(args: argparse.Namespace) -> int:
    from gpupool.plan import train as t

    mode = _mode(args)
    hw = _hardware(args)
    ratio = _positive(args.tokens_per_param, "--tokens-per-param")
    gpus = _whole(args.gpus, "--gpus") if args.gpus is not None else 1

    params: float | None = None
    tokens: float | None = None
    if mode == "budget":
        if args.budget_flops is not None:
            budget = _positive(args.budget_flops, "--budget-flops")
        else:
            days = _positive(args.days, "--days")
            budget = t.budget_from_gpu_days(gpus, days, hw["peak_tflops"], hw["mfu"])
        optimal = t.compute_optimal(budget, ratio)
        flops = budget
    else:
        params = _positive(args.params, "--params")
        if mode == "time":
            tokens = _positive(args.tokens, "--tokens")
        else:
            tokens = t.compute_optimal_tokens(params, ratio)
        flops = t.training_flops(params, tokens)
        optimal = t.compute_optimal(flops, ratio)
    time = t.train_time(
        flops, gpus, hw["peak_tflops"], hw["mfu"], hw["usd_per_gpu_hour"], hw["tdp_w"]
    )
    sweep = [
        {"gpus": n, "mfu": m, "days": t.train_time(flops, n, hw["peak_tflops"], m).days}
        for n in t.gpu_count_sweep(gpus)
        for m in sorted({*SWEEP_MFUS, hw["mfu"]})
    ]
    result = {
        "mode": mode,
        "params": params,
        "tokens": tokens,
        "tokens_per_param": None if params is None or tokens is None else tokens / params,
        "compute_optimal_tokens": None
        if params is None
        else t.compute_optimal_tokens(params, ratio),
        **time.__dict__,
        "compute_optimal": optimal,
    }
    verdict = _verdict(mode, result, optimal)
    assumptions = {
        "flops": "6 x params x tokens (Kaplan et al. 2020)",
        "peak": f"{hw['peak_tflops']:g} TFLOPS per GPU ({hw['peak_source']})",
        "mfu": f"{hw['mfu']:g} of peak sustained" + (" (default)" if args.mfu is None else ""),
        "scaling": "ideal: time halves when GPUs double (see `gpupool plan scaling`)",
        "compute_optimal": f"{ratio:g} tokens per parameter (Hoffmann et al. 2022)",
        "price": hw["price_source"],
        "energy": "GPUs x TDP x hours, GPU boards only (no host, network, PUE)"
        if hw["tdp_w"]
        else "no TDP: no energy",
    }
    if args.json:
        from gpupool.cli.plan.common import print_json

        inputs = {
            k: getattr(args, k)
            for k in (
                "params",
                "tokens",
                "gpus",
                "days",
                "budget_flops",
                "gpu",
                "precision",
                "peak_tflops",
                "mfu",
                "usd_per_gpu_hour",
                "cloud_instance",
                "tdp_w",
                "tokens_per_param",
            )
        }
        print_json(
            {
                "inputs": inputs,
                "hardware": hw,
                "assumptions": assumptions,
                **result,
                "sweep": sweep,
                "verdict": verdict,
            }
        )
    else:
        _print_tables(result, optimal, sweep, hw, gpus)
        print(verdict)
        print("assumptions: " + "; ".join(f"{k}: {v}" for k, v in assumptions.items()))
    if args.plot:
        from gpupool.cli.plan.common import save_plot

        out = save_plot(args.plot, lambda fig: _draw(fig, sweep, gpus, hw["mfu"], time.days))
        print(f"gpupool plan train: plot written to {out}", file=sys.stderr)
    return 0


def _short(count: float) -> str:
    """175e9 -> '175B'."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if count >= scale:
            return f"{count / scale:.3g}{suffix}"
    return f"{count:.3g}"


def _days(days: float) -> str:
    return f"{days:,.1f}" if days >= 10 else f"{days:.3g}"


def _verdict(mode: str, r: dict[str, Any], optimal: Any) -> str:
    gpus = f"{r['gpus']:,} GPU" + ("s" if r["gpus"] != 1 else "")
    when = f"{r['days']:,.2f} days on {gpus} at {r['mfu']:g} MFU"
    if mode == "budget":
        return (
            f"{optimal.budget_flops:.3g} FLOPs is compute-optimal for {_short(optimal.params_opt)} "
            f"params on {_short(optimal.tokens_opt)} tokens ({when})"
        )
    head = f"{r['flops']:.3g} FLOPs: {when}"
    if mode == "optimal-tokens":
        return f"{head}, training {_short(r['params'])} params on its compute-optimal {_short(r['tokens'])} tokens"
    ratio = r["tokens_per_param"] / optimal.tokens_per_param
    shape = (
        "about compute-optimal"
        if 0.8 <= ratio <= 1.25
        else (
            "more params than compute-optimal" if ratio < 1 else "more tokens than compute-optimal"
        )
    )
    return (
        f"{head}; {r['tokens_per_param']:.3g} tokens/param, {shape} (same FLOPs: "
        f"{_short(optimal.params_opt)} params on {_short(optimal.tokens_opt)} tokens)"
    )


def _human(count: float | None) -> str:
    """175e9 -> '175B (1.75e+11)': model and data sizes as they are spoken, and exactly."""
    if count is None:
        return "-"
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if count >= scale:
            return f"{count / scale:.4g}{suffix} ({count:.3g})"
    return f"{count:.4g}"


def _print_tables(
    r: dict[str, Any], optimal: Any, sweep: list[dict[str, Any]], hw: dict[str, Any], gpus: int
) -> None:
    from gpupool.cli.plan.common import print_rich_table

    def opt(v: float | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    rows = [
        ["params", _human(r["params"])],
        ["tokens", _human(r["tokens"])],
        ["FLOPs (6 N D)", f"{r['flops']:.4g}"],
        ["GPUs x peak x MFU", f"{gpus:,} x {hw['peak_tflops']:g} TFLOPS x {hw['mfu']:g}"],
        ["time (s)", f"{r['seconds']:.4g}"],
        ["time (hours)", f"{r['hours']:,.1f}"],
        ["time (days)", f"{r['days']:,.2f}"],
        ["GPU-hours", f"{r['gpu_hours']:,.0f}"],
        ["cost (USD)", opt(r["cost_usd"], ",.0f")],
        ["energy (kWh)", opt(r["energy_kwh"], ",.0f")],
        ["compute-optimal params for these FLOPs", _human(optimal.params_opt)],
        ["compute-optimal tokens for these FLOPs", _human(optimal.tokens_opt)],
    ]
    print_rich_table(f"Training plan ({r['mode']} mode)", ["", "value"], rows)
    mfus = sorted({row["mfu"] for row in sweep})
    grid: dict[int, dict[float, float]] = {}
    for row in sweep:
        grid.setdefault(row["gpus"], {})[row["mfu"]] = row["days"]
    sweep_rows = []
    for n, by_mfu in grid.items():
        cells = [f"{n:,}"] + [_days(by_mfu[m]) for m in mfus]
        sweep_rows.append([f"[bold green]{c}[/]" for c in cells] if n == gpus else cells)
    columns = ["GPUs"] + [f"MFU {m:g}" + (" *" if m == hw["mfu"] else "") for m in mfus]
    print_rich_table(
        "Training days by GPU count and MFU",
        columns,
        sweep_rows,
        caption="ideal scaling; * the MFU assumed above",
    )


def _draw(fig: Any, sweep: list[dict[str, Any]], gpus: int, mfu: float, days: float) -> None:
    ax = fig.subplots()
    for m in sorted({row["mfu"] for row in sweep}):
        points = [(row["gpus"], row["days"]) for row in sweep if row["mfu"] == m]
        ax.plot(*zip(*points), marker=".", linewidth=2.0 if m == mfu else 1.0, label=f"MFU {m:g}")
    ax.plot([gpus], [days], "o", color="black")
    ax.annotate(
        f"{days:,.1f} days on {gpus:,} GPUs",
        (gpus, days),
        textcoords="offset points",
        xytext=(8, 8),
        fontsize=8,
    )
    from matplotlib.ticker import ScalarFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_yscale("log")
    ax.set_xlabel("GPUs")
    ax.set_ylabel("training days")
    ax.set_title("Training days vs GPU count (6 N D / (GPUs x peak x MFU))")
    ax.legend(fontsize=8)
