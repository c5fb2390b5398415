"""`gpupool bench ddp-sweep`: seed 004's experiment made repeatable.

Seed 004 ("Characterizing Multi-GPU Data Parallel NN Training") trained a 12.1M-parameter MLP
and a 376k-parameter 1-D CNN with nn.DataParallel at batch sizes 10..600 on 1..4 GPUs and
found two regimes: the MLP's 46 MB of gradients choke the network ("don't add GPUs"), the
CNN's compute keeps the GPUs busy ("add GPUs"). This benchmark measures both models in both
modes (DataParallel, DDP) at every batch size and GPU count 1, 2, 4, ..., N, and puts the
verdict of `gpupool plan scaling` (gpupool.plan.scaling.plan_scaling, given the model's
parameter count, the measured 1-GPU step time and the machine's link) next to the verdict
the same rule gives on the measured speedups.

Rows (BenchResult): `table=throughput` per (model, mode, gpus, batch): samples/s, step ms,
loss, speedup over 1 GPU at the same global batch, efficiency; `table=verdict` per (model,
batch, source=plan|dp|ddp): the choke and verdict at the largest GPU count. The batch is the
global batch of one step (strong scaling: DDP ranks take batch // N each).

torch is imported inside `run` only (ddp_measure.py, seed004.py); matplotlib only for --plot.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import replace

from gpupool.hwbench.ddp_cells import SEED_BATCH_SIZES, TINY_BATCH_SIZES, Cell, Mode, SweepSpec
from gpupool.hwbench.result import BenchResult, Label, Progress, Row
from gpupool.plan.catalog import load_catalog
from gpupool.plan.scaling import (
    ScalingPlan,
    ScalingPoint,
    gpu_counts,
    plan_scaling,
    scaling_verdict,
)

NAME = "ddp-sweep"
DEFAULT_INTERCONNECT = "pcie4-x16"  # as `gpupool plan scaling`: a PCIe server without NVLink
BYTES_PER_GRADIENT = 4.0  # the models train in fp32
FULL_LENGTH, TINY_LENGTH = 12_000, 1_200  # = seed004's (not imported: it imports torch)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument(
        "--tiny",
        action="store_true",
        help="CI on a CPU: 1,200-sample inputs, batches 10 and 40, 1..2 ranks, 3 steps",
    )
    p.add_argument("--models", default="mlp,cnn", help="comma-separated: mlp, cnn")
    p.add_argument("--modes", default="dp,ddp", help="comma-separated: dp, ddp")
    p.add_argument(
        "--batch-sizes", help="global batch per step, comma-separated (default seed 004's 10..600)"
    )
    p.add_argument(
        "--max-gpus",
        type=int,
        help="largest GPU (rank) count: 1, 2, 4, ... and it (default: all)",
    )
    p.add_argument("--steps", type=int, help="timed steps per cell (default 20; --tiny 3)")
    p.add_argument("--warmup", type=int, help="untimed steps first (default 3; --tiny 1)")
    link = p.add_argument_group("the link for plan scaling's verdict")
    link.add_argument(
        "--interconnect", help=f"a catalog interconnect (default {DEFAULT_INTERCONNECT})"
    )
    link.add_argument("--bandwidth", type=float, help="GB/s per GPU per direction, instead")
    p.add_argument("--plot", metavar="FILE", help="write throughput vs GPUs as a PNG here")


def _names(text: str, allowed: Sequence[str], flag: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        raise ValueError(f"{flag}: expected some of {', '.join(allowed)}, got {text!r}")
    return names


def _batches(args: argparse.Namespace) -> tuple[int, ...]:
    if args.batch_sizes is None:
        return TINY_BATCH_SIZES if args.tiny else SEED_BATCH_SIZES
    try:
        sizes = tuple(int(b) for b in args.batch_sizes.split(","))
    except ValueError:
        raise ValueError(
            f"--batch-sizes: whole numbers expected, got {args.batch_sizes!r}"
        ) from None
    if not sizes or min(sizes) < 1:
        raise ValueError(f"--batch-sizes: positive sizes expected, got {args.batch_sizes!r}")
    return sizes


def _link(args: argparse.Namespace) -> tuple[float, float, str]:
    """Bytes/s and latency (s) per ring step for the plan, and where they came from."""
    if args.bandwidth is not None:
        if args.interconnect is not None:
            raise ValueError("--bandwidth: give either --bandwidth or --interconnect")
        if not args.bandwidth > 0:
            raise ValueError(f"--bandwidth must be positive, got {args.bandwidth:g}")
        return args.bandwidth * 1e9, 0.0, f"--bandwidth {args.bandwidth:g} GB/s"
    spec = load_catalog().interconnect(args.interconnect or DEFAULT_INTERCONNECT)
    return (
        spec.bandwidth_gbs * 1e9,
        spec.latency_us * 1e-6,
        f"{spec.name} ({spec.bandwidth_gbs:g} GB/s, {spec.latency_us:g} us, catalog)",
    )


def run(args: argparse.Namespace, progress: Progress) -> BenchResult:
    import torch

    from gpupool.hwbench import ddp_measure
    from gpupool.hwbench.machine import torch_machine

    started = time.time()
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: torch sees no CUDA GPU")
    models = _names(args.models, ("mlp", "cnn"), "--models")
    modes = tuple(Mode(m) for m in _names(args.modes, [m.value for m in Mode], "--modes"))
    visible = torch.cuda.device_count() if device == "cuda" else 2
    max_gpus = args.max_gpus if args.max_gpus is not None else visible
    if max_gpus < 1 or (device == "cuda" and max_gpus > visible):
        raise ValueError(f"--gpus: 1..{visible} on this machine ({device}), got {max_gpus}")
    if args.tiny:
        max_gpus = min(max_gpus, 2)
    spec = SweepSpec(
        models=models,
        batch_sizes=_batches(args),
        length=TINY_LENGTH if args.tiny else FULL_LENGTH,
        device=device,
        steps=args.steps if args.steps is not None else (3 if args.tiny else 20),
        warmup=args.warmup if args.warmup is not None else (1 if args.tiny else 3),
    )
    bandwidth, latency_s, link = _link(args)
    world = ddp_measure.torchrun_world()
    counts = gpu_counts(max_gpus) if world is None else tuple(sorted({1, world}))
    dp_counts = counts if device == "cuda" else (1,)  # DataParallel on no GPUs: the plain model

    cells: list[Cell] = []

    def emit(cell: Cell) -> None:
        cells.append(cell)
        progress.advance()

    per_count = len(spec.models) * len(spec.batch_sizes)
    if world is not None:
        progress.start(per_count * 2, f"{NAME}: DDP at {world} torchrun ranks")
        ddp_measure.measure_ddp_joined(spec, emit)
    else:
        total = per_count * (
            (len(dp_counts) if Mode.DP in modes else 0) + (len(counts) if Mode.DDP in modes else 0)
        )
        progress.start(total, NAME)
        if Mode.DP in modes:
            for n in dp_counts:
                ddp_measure.measure_dp(spec, n, emit)
        if Mode.DDP in modes:
            for n in counts:
                ddp_measure.measure_ddp_spawned(spec, n, emit)

    rows = _throughput_rows(cells)
    verdict_rows, verdict_notes = _verdicts(cells, spec, max(counts), bandwidth, latency_s, link)
    notes = verdict_notes
    notes += _honest_notes(device, world, link)
    ddp_cells = [c for c in cells if c.mode is Mode.DDP]
    checks = {
        "every cell measured": bool(cells),
        "throughput positive": bool(cells) and all(c.samples_per_s > 0 for c in cells),
        "loss finite": all(math.isfinite(c.loss) for c in cells),
        "plan verdict for each model": {r.labels["model"] for r in verdict_rows} >= set(models),
    }
    if ddp_cells:
        checks["DDP replicas agree"] = all(c.replicas_agree for c in ddp_cells)
    result = BenchResult(
        benchmark=NAME,
        machine=torch_machine(device),
        started_at=started,
        params={
            "models": list(models),
            "modes": [m.value for m in modes],
            "batch_sizes": list(spec.batch_sizes),
            "gpu_counts": list(counts),
            "input_length": spec.length,
            "steps": spec.steps,
            "warmup": spec.warmup,
            "tiny": bool(args.tiny),
            "launch": "spawned local ranks" if world is None else "torchrun",
            "link": link,
        },
        rows=tuple(rows + verdict_rows),
        checks=checks,
        notes=tuple(notes),
    )
    if args.plot:
        from gpupool.hwbench.sweep_plot import write_plot

        write_plot(result, args.plot)
    return result


def _baseline(cells: Sequence[Cell], model: str, batch: int, mode: Mode) -> Cell | None:
    """The 1-GPU cell a speedup is measured against: this mode's, else the other mode's."""
    ones = [c for c in cells if c.model == model and c.batch == batch and c.gpus == 1]
    same = [c for c in ones if c.mode is mode]
    found = same or ones
    return found[0] if found else None


def _throughput_rows(cells: Sequence[Cell]) -> list[Row]:
    rows = []
    for c in cells:
        values = {
            "samples_per_s": c.samples_per_s,
            "step_ms": c.step_s * 1e3,
            "loss": c.loss,
            "samples_per_step": float(c.samples_per_step),
        }
        base = _baseline(cells, c.model, c.batch, c.mode)
        if base is not None and base.samples_per_s > 0:
            speedup = c.samples_per_s / base.samples_per_s
            values |= {"speedup": speedup, "efficiency": speedup / c.gpus}
        labels = {"table": "throughput", "model": c.model, "mode": c.mode.value}
        rows.append(Row(labels | {"gpus": c.gpus, "batch": c.batch}, values))
    return rows


def _verdicts(
    cells: Sequence[Cell],
    spec: SweepSpec,
    max_gpus: int,
    bandwidth: float,
    latency_s: float,
    link: str,
) -> tuple[list[Row], list[str]]:
    """Per model and batch: plan scaling's verdict from the measured 1-GPU step, and the same
    rule (scaling_verdict) applied to the measured speedups of each mode."""
    rows: list[Row] = []
    notes: list[str] = []
    for model in spec.models:
        params = next((c.params for c in cells if c.model == model), 0)
        summary: dict[str, list[str]] = {}
        for batch in spec.batch_sizes:
            base = _baseline(cells, model, batch, Mode.DDP)
            if base is None or params <= 0:
                continue
            plan = plan_scaling(
                params,
                max_gpus,
                bandwidth,
                bytes_per_param=BYTES_PER_GRADIENT,
                latency_s=latency_s,
                step_ms=base.step_s * 1e3,
                batch=batch,
                strong_scaling=True,
            )
            found = [("plan", plan.choke, plan.verdict, plan.points[-1])]
            for mode in Mode:
                measured = _measured_plan(cells, model, batch, mode, plan)
                if measured is not None:
                    choke, verdict, _ = scaling_verdict(measured)
                    found.append((mode.value, choke, verdict, measured[-1]))
            for source, choke, verdict, last in found:
                labels: dict[str, Label] = {
                    "table": "verdict",
                    "model": model,
                    "batch": batch,
                    "source": source,
                    "choke": choke,
                    "verdict": verdict,
                }
                values = {"gpus": float(last.gpus)}
                if last.speedup is not None and last.efficiency is not None:
                    values |= {"speedup": last.speedup, "efficiency": last.efficiency}
                rows.append(Row(labels, values))
                summary.setdefault(source, []).append(f"{batch}: {choke}")
        if summary:
            said = "; ".join(f"{src}: {', '.join(v)}" for src, v in summary.items())
            notes.append(
                f"{model} ({params:,} params, {params * BYTES_PER_GRADIENT / 1e6:.3g} MB of fp32 "
                f"gradients) at {link}, choke by batch: {said}"
            )
    return rows, notes


def _measured_plan(
    cells: Sequence[Cell], model: str, batch: int, mode: Mode, plan: ScalingPlan
) -> list[ScalingPoint] | None:
    """The plan's points at the GPU counts measured in `mode`, with the measured speedups in
    place of the predicted ones (None below two counts: no step up to judge)."""
    base = _baseline(cells, model, batch, mode)
    if base is None:
        return None
    by_gpus = {c.gpus: c for c in cells if c.model == model and c.batch == batch and c.mode is mode}
    points = []
    for p in plan.points:
        cell = by_gpus.get(p.gpus)
        if cell is not None:
            speedup = cell.samples_per_s / base.samples_per_s
            points.append(replace(p, speedup=speedup, efficiency=speedup / p.gpus))
    return points if len(points) >= 2 else None


def _honest_notes(device: str, world: int | None, link: str) -> list[str]:
    notes = [
        "batch = the global batch of one step: DataParallel splits it over its GPUs, each DDP "
        "rank takes batch // N (strong scaling, as plan scaling --global-batch)",
        "speedup = samples/s at N over samples/s at 1 GPU, same model and batch",
    ]
    if device == "cpu":
        notes += [
            "device: cpu: DDP ranks are gloo processes sharing this machine's cores, so more "
            "ranks do not add compute; the numbers test the code path, not a GPU's scaling",
            "DataParallel on the CPU: torch's DataParallel with no GPUs runs the wrapped module "
            "directly (no scatter, no replicas), so it is measured at 1 only",
            f"plan scaling's verdict assumes {link}; gloo ranks talk over loopback/shared "
            "memory here, so plan and measured are not like for like on the CPU",
        ]
    if world is not None:
        notes.append(
            f"under torchrun: DDP measured at the gang's {world} ranks only, against rank 0's "
            "1-GPU plain model; run it as a plain job (no --distributed) for the 1..N sweep"
        )
    return notes
