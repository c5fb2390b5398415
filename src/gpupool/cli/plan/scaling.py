"""`gpupool plan scaling`: data-parallel step time, speedup and efficiency per GPU count.

    gpupool plan scaling --params 25557032 --gpus 8 --bandwidth 10GB/s
    gpupool plan scaling --params 25.6M --gpus 16 --interconnect ib-hdr --step-ms 120 --batch 64
    gpupool plan scaling --params 12.1M --gpus 4 --bandwidth 10GB/s --samples 2000 \\
        --batch 20 --global-batch

The arithmetic is gpupool.plan.scaling; this module parses flags, resolves the interconnect and
GPU through the catalog and prints. Nothing heavy is imported at module top.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gpupool.cli.plan.common import named

DEFAULT_INTERCONNECT = "pcie4-x16"  # what a PCIe server without NVLink gives each GPU


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params", required=True, help="model parameters: 25557032, 25.6M, 7B")
    p.add_argument(
        "--bytes-per-param", default="4", help="bytes per gradient: 4 fp32 (default), 2 bf16"
    )
    p.add_argument("--gpus", required=True, help="largest GPU count: shows 1, 2, 4, ... and it")
    link = p.add_argument_group("the link each GPU all-reduces over (default: pcie4-x16)")
    link.add_argument("--bandwidth", help="GB/s per GPU per direction: 10GB/s, 100Gb/s, 25")
    link.add_argument("--interconnect", help="a catalog interconnect: nvlink3, pcie4-x16, ib-ndr")
    link.add_argument(
        "--latency-us",
        help="per ring step (default: the interconnect's, or 0 with a bare --bandwidth)",
    )
    link.add_argument("--bucket-mb", default="25", help="DDP gradient bucket, MB (default 25)")
    work = p.add_argument_group(
        "compute per step: --step-ms, or --gpu, --flops-per-sample and --batch (with --mfu)"
    )
    work.add_argument("--step-ms", help="one GPU's compute per step (forward + backward), ms")
    work.add_argument("--gpu", help="a catalog GPU, to derive the step from FLOPs")
    work.add_argument("--flops-per-sample", help="training FLOPs per sample (~3x forward)")
    work.add_argument("--mfu", default="0.4", help="model FLOPs utilization (default 0.4)")
    work.add_argument("--precision", default="bf16", choices=["bf16", "fp16", "fp32"])
    work.add_argument("--batch", help="samples per GPU per step (or global with --global-batch)")
    work.add_argument(
        "--global-batch",
        action="store_true",
        help="--batch is the global batch, split across GPUs (strong scaling); default: per GPU",
    )
    work.add_argument("--samples", help="samples per epoch, for traffic per epoch")


def _positive(text: str, flag: str) -> float:
    from gpupool.plan.quantity import PlanError, parse_count

    value = parse_count(text, flag)
    if not value > 0:
        raise PlanError(f"{flag} must be positive, got {text!r}")
    return value


def _optional(text: str | None, flag: str) -> float | None:
    return None if text is None else _positive(text, flag)


def _link(args: argparse.Namespace, catalog: Any) -> tuple[float, float, str]:
    """Bytes/s, latency in seconds, and where they came from."""
    from gpupool.plan.quantity import PlanError, parse_bandwidth, parse_count

    if args.bandwidth is not None and args.interconnect is not None:
        raise PlanError("--bandwidth: give either --bandwidth or --interconnect, not both")
    latency_us = None
    if args.latency_us is not None:
        latency_us = parse_count(args.latency_us, "--latency-us")
    if args.bandwidth is not None:
        bandwidth = parse_bandwidth(args.bandwidth, "--bandwidth")
        return bandwidth, (latency_us or 0.0) * 1e-6, f"--bandwidth {args.bandwidth}"
    link = named(
        catalog().interconnect, args.interconnect or DEFAULT_INTERCONNECT, "--interconnect"
    )
    if latency_us is None:
        latency_us = link.latency_us
    origin = f"{link.name} from the catalog ({link.bandwidth_gbs:g} GB/s, {link.latency_us:g} us)"
    if args.interconnect is None:
        origin += " (default)"
    return link.bandwidth_gbs * 1e9, latency_us * 1e-6, origin


def _mfu(text: str) -> float:
    from gpupool.cli.plan.common import fraction
    from gpupool.plan.quantity import PlanError

    try:
        return fraction(float(text), "--mfu")
    except ValueError:
        raise PlanError(f"--mfu: not a number: {text!r}") from None


def _compute(
    args: argparse.Namespace, catalog: Any, batch: float | None, mfu: float
) -> tuple[float | None, str]:
    """One GPU's compute per step in ms (None if unknown), and where it came from."""
    from gpupool.plan.quantity import PlanError
    from gpupool.plan.scaling import compute_ms_from_flops

    derive = [f for f in ("gpu", "flops_per_sample") if getattr(args, f) is not None]
    if args.step_ms is not None:
        if derive:
            raise PlanError("--step-ms: give either --step-ms or --gpu with --flops-per-sample")
        return _positive(args.step_ms, "--step-ms"), "--step-ms"
    if not derive:
        return None, "not given: no speedup or verdict"
    missing = [f for f in ("gpu", "flops_per_sample", "batch") if getattr(args, f) is None]
    if missing:
        flags = ", ".join("--" + f.replace("_", "-") for f in missing)
        raise PlanError(f"deriving the step from FLOPs also needs {flags}")
    gpu = named(catalog().gpu, args.gpu, "--gpu")
    peak = gpu.peak_tflops(args.precision)
    flops = _positive(args.flops_per_sample, "--flops-per-sample")
    assert batch is not None
    ms = compute_ms_from_flops(flops, batch, peak, mfu)
    return ms, f"{flops:.3g} FLOPs x {batch:g} samples / ({gpu.name} {peak:g} TFLOPS x MFU {mfu:g})"


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 10**digits else f"{value:.{digits}g}"


def run(args: argparse.Namespace) -> int:
    from gpupool.cli.plan.common import load_catalog, print_json, print_rich_table
    from gpupool.plan.quantity import PlanError
    from gpupool.plan.scaling import plan_scaling

    params = _positive(args.params, "--params")
    gpus_value = _positive(args.gpus, "--gpus")
    if gpus_value != int(gpus_value):
        raise PlanError(f"--gpus must be a whole number, got {args.gpus!r}")
    gpus = int(gpus_value)
    bytes_per_param = _positive(args.bytes_per_param, "--bytes-per-param")
    bucket_mb = _positive(args.bucket_mb, "--bucket-mb")
    batch = _optional(args.batch, "--batch")
    samples = _optional(args.samples, "--samples")
    mfu = _mfu(args.mfu)
    if args.global_batch and batch is None:
        raise PlanError("--global-batch needs --batch (the global batch size)")
    if samples is not None and batch is None:
        raise PlanError("--samples needs --batch to count steps per epoch")

    cache: list[Any] = []

    def catalog() -> Any:  # loaded only when a name needs resolving
        if not cache:
            cache.append(load_catalog(args))
        return cache[0]

    bandwidth, latency_s, link_origin = _link(args, catalog)
    step_ms, step_origin = _compute(args, catalog, batch, mfu)
    plan = plan_scaling(
        params,
        gpus,
        bandwidth,
        bytes_per_param=bytes_per_param,
        latency_s=latency_s,
        step_ms=step_ms,
        batch=batch,
        strong_scaling=args.global_batch,
        samples=samples,
        bucket_bytes=bucket_mb * 1e6,
    )
    last = plan.points[-1]
    scaling = "strong: global batch split" if args.global_batch else "weak: per-GPU batch fixed"
    assumptions = {
        "link": link_origin,
        "latency_us_per_ring_step": round(latency_s * 1e6, 9),
        "compute": step_origin,
        "scaling": scaling,
        "ring_allreduce": "2(N-1)/N x bytes / bandwidth + 2(N-1) x latency, per bucket",
        "overlap": f"DDP buckets of {bucket_mb:g} MB (Li et al. VLDB 2020); backward = "
        "2/3 of compute; all buckets but the last hide behind it",
        "verdict": "network choke if efficiency < 50% at the largest N or its last step up "
        "gains < 20% of ideal (a doubling < 1.2x)",
        "dataparallel": "GPU 0 sends params and gathers grads: 2(N-1) x param bytes per step",
        "units": "MB = 1e6 bytes, GB = 1e9 bytes",
    }
    summary = f"{plan.verdict} ({plan.reason})"

    if args.json:
        inputs = {
            "params": params,
            "bytes_per_param": bytes_per_param,
            "gpus": gpus,
            "bandwidth_gbs": bandwidth / 1e9,
            "interconnect": args.interconnect,
            "latency_us": round(latency_s * 1e6, 9),
            "bucket_mb": bucket_mb,
            "step_ms": _optional(args.step_ms, "--step-ms"),
            "gpu": args.gpu,
            "flops_per_sample": _optional(args.flops_per_sample, "--flops-per-sample"),
            "mfu": mfu,
            "precision": args.precision,
            "batch": batch,
            "global_batch": bool(args.global_batch),
            "samples": samples,
        }
        print_json(
            {
                "inputs": inputs,
                "assumptions": assumptions,
                "gradient_mb": plan.gradient_bytes / 1e6,
                "buckets": plan.buckets,
                "bus_bandwidth_factor": last.bus_bandwidth_factor,
                "allreduce_ms": last.allreduce_ms,
                "exposed_comm_ms": last.exposed_comm_ms,
                "step_ms": last.step_ms,
                "speedup": last.speedup,
                "efficiency": last.efficiency,
                "ddp_gb_per_gpu_per_epoch": last.ddp_gb_per_gpu_per_epoch,
                "dataparallel_gpu0_gb_per_epoch": last.dataparallel_gpu0_gb_per_epoch,
                "dataparallel_gb_per_link_per_epoch": last.dataparallel_gb_per_link_per_epoch,
                "points": plan.points,
                "choke": plan.choke,
                "verdict": plan.verdict,
                "reason": plan.reason,
                "summary": summary,
            }
        )
    else:
        _print_tables(plan, params, bandwidth, print_rich_table)
        print(summary)
        print("assumptions: " + "; ".join(f"{k}: {v}" for k, v in assumptions.items()))

    if args.plot:
        from gpupool.cli.plan.common import save_plot

        out = save_plot(args.plot, lambda fig: _draw(fig, plan, bandwidth), figsize=(11, 4.5))
        print(f"gpupool plan scaling: plot written to {out}", file=sys.stderr)
    return 0


def _print_tables(plan: Any, params: float, bandwidth: float, print_rich_table: Any) -> None:
    rows = [
        [
            p.gpus,
            _fmt(p.compute_ms),
            _fmt(p.allreduce_ms),
            _fmt(p.exposed_comm_ms),
            _fmt(p.step_ms),
            _fmt(p.samples_per_s),
            _fmt(p.speedup),
            "-" if p.efficiency is None else f"{p.efficiency:.0%}",
        ]
        for p in plan.points
    ]
    print_rich_table(
        f"Data-parallel steps: {params:.4g} params ({plan.gradient_bytes / 1e6:.4g} MB of "
        f"gradients) at {bandwidth / 1e9:g} GB/s",
        [
            "GPUs",
            "compute ms",
            "all-reduce ms",
            "exposed ms",
            "step ms",
            "samples/s",
            "speedup",
            "efficiency",
        ],
        rows,
        caption="step = compute + the all-reduce not hidden behind backward (DDP buckets)",
    )
    per_epoch = plan.points[-1].steps_per_epoch is not None
    columns = ["GPUs", "DDP MB/step", "DP0 MB/step", "DP0 ms"]
    if per_epoch:
        columns += ["steps/epoch", "DDP GB/epoch", "DP0 GB/epoch", "DP GB/link/ep"]
    traffic = []
    for p in plan.points:
        row = [
            p.gpus,
            _fmt(p.ddp_mb_per_gpu_per_step),
            _fmt(p.dataparallel_gpu0_mb_per_step),
            _fmt(p.dataparallel_gpu0_ms),
        ]
        if per_epoch:
            row += [
                f"{p.steps_per_epoch:,}",
                _fmt(p.ddp_gb_per_gpu_per_epoch),
                _fmt(p.dataparallel_gpu0_gb_per_epoch),
                _fmt(p.dataparallel_gb_per_link_per_epoch),
            ]
        traffic.append(row)
    print_rich_table(
        "Gradient traffic: DDP (ring, every GPU) vs nn.DataParallel (through GPU 0)",
        columns,
        traffic,
        caption="DDP: 2(N-1)/N x grads, per GPU; DP0: nn.DataParallel's GPU 0, 2(N-1) x params"
        + (
            "; DP GB/link: 2 x params per GPU-to-GPU channel (as in "
            '"Characterizing Multi-GPU Data Parallel NN Training")'
            if per_epoch
            else ""
        ),
    )


def _draw(fig: Any, plan: Any, bandwidth: float) -> None:
    """Left: speedup vs GPUs against the ideal line. Right: compute and exposed communication
    per step, with the whole all-reduce and its 2 x bytes / bandwidth ceiling."""
    left, right = fig.subplots(1, 2)
    counts = [p.gpus for p in plan.points]
    labels = [str(n) for n in counts]
    if plan.points[-1].speedup is not None:
        left.plot(counts, counts, linestyle="--", color="grey", label="ideal (N)")
        left.plot(counts, [p.speedup for p in plan.points], marker="o", label="predicted")
        left.set_ylabel("speedup over 1 GPU")
        left.legend()
    else:
        left.text(
            0.5,
            0.5,
            "no compute time given:\n--step-ms for a speedup",
            ha="center",
            va="center",
            transform=left.transAxes,
        )
    left.set_xticks(counts, labels)
    left.set_xlabel("GPUs")
    left.set_title(plan.verdict.split(":")[0])

    positions = range(len(counts))
    if plan.points[-1].compute_ms is not None:
        compute = [p.compute_ms for p in plan.points]
        exposed = [p.exposed_comm_ms for p in plan.points]
        right.bar(positions, compute, label="compute", color="tab:blue")
        right.bar(positions, exposed, bottom=compute, label="exposed comm", color="tab:red")
    right.plot(
        positions,
        [p.allreduce_ms for p in plan.points],
        marker="o",
        color="black",
        label="whole all-reduce",
    )
    right.axhline(
        2 * plan.gradient_bytes / bandwidth * 1e3,
        color="grey",
        linestyle=":",
        label="2 x bytes / bandwidth",
    )
    right.set_xticks(list(positions), labels)
    right.set_xlabel("GPUs")
    right.set_ylabel("ms per step")
    right.set_title("Where a step's time goes")
    right.legend(fontsize=8)
