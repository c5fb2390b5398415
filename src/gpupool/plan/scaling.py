"""Data-parallel scaling: step time, speedup and efficiency per GPU count, and whether the
next GPUs help (seed 004: "GPU choke: add GPUs" / "network choke: don't add GPUs").

Ring all-reduce (Patarasuk and Yuan 2009; NCCL, Woolley's "NCCL: accelerated multi-GPU
collective communications", seed 004 [5]): a reduce-scatter and an all-gather, each N - 1 steps
moving 1/N of the buffer over every link, so

    t = 2(N-1)/N x bytes / bandwidth + 2(N-1) x latency

2(N-1)/N is the "bus bandwidth" factor nccl-tests divide by (1.75 at N = 8): 1 GB across 8 GPUs
at 100 GB/s takes 17.5 ms; ResNet-50's 25,557,032 fp32 gradients (102.2 MB) at 10 GB/s, 17.9 ms.
As N grows t climbs toward 2 x bytes / bandwidth: more GPUs never make the ring cheaper.

Overlap (PyTorch DDP, Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel
Training", VLDB 2020): gradients are packed into buckets (25 MB by default) and each bucket's
all-reduce starts as soon as backward has produced it. Model: backward is 2/3 of compute (its
FLOPs are twice the forward's); every bucket but the last can hide behind backward, the last is
only ready when backward ends:

    exposed = max(0, allreduce(all buckets but the last) - backward) + allreduce(last bucket)
    step    = compute + exposed

This is slightly optimistic (the first bucket is not ready the moment backward starts) and
ignores the all-reduce kernels slowing the backward kernels they share the GPU with.

nn.DataParallel (seed 004): one process scatters inputs, replicates the parameters from GPU 0
to each other GPU and gathers their gradients back every step: all parameters cross each
GPU-to-GPU channel twice per batch, and GPU 0 carries 2(N-1) x parameter bytes. DDP's ring moves
2(N-1)/N x gradient bytes per GPU, spread evenly over all GPUs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gpupool.plan.quantity import PlanError

DEFAULT_BUCKET_BYTES = 25e6  # torch.nn.parallel.DistributedDataParallel(bucket_cap_mb=25)
BACKWARD_FRACTION = 2 / 3  # backward ~ 2x forward FLOPs (Kaplan et al. 2020: 6N = 2N + 4N)
# Verdict thresholds: "network choke" when the largest N runs below half its ideal speedup, or
# when the last step up in GPUs bought less than a fifth of its ideal gain (a doubling < 1.2x).
EFFICIENCY_FLOOR = 0.5
MARGINAL_GAIN_FLOOR = 0.2


def bus_bandwidth_factor(gpus: int) -> float:
    """2(N-1)/N: how many times its buffer a GPU sends (and receives) in a ring all-reduce."""
    if gpus < 1:
        raise PlanError(f"--gpus must be at least 1, got {gpus}")
    return 2 * (gpus - 1) / gpus


def ring_allreduce_seconds(
    nbytes: float, gpus: int, bandwidth: float, latency_s: float = 0.0
) -> float:
    """2(N-1)/N x bytes / bandwidth + 2(N-1) x latency; bandwidth in bytes/s per direction."""
    if bandwidth <= 0:
        raise PlanError(f"--bandwidth must be positive, got {bandwidth:g}")
    return bus_bandwidth_factor(gpus) * nbytes / bandwidth + 2 * (gpus - 1) * latency_s


def gpu_counts(max_gpus: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to max_gpus, and max_gpus itself (12 -> 1, 2, 4, 8, 12)."""
    if max_gpus < 1:
        raise PlanError(f"--gpus must be at least 1, got {max_gpus}")
    counts = {2**k for k in range(max_gpus.bit_length()) if 2**k <= max_gpus}
    return tuple(sorted(counts | {max_gpus}))


def compute_ms_from_flops(
    flops_per_sample: float, batch: float, peak_tflops: float, mfu: float
) -> float:
    """One GPU's compute per step: training FLOPs per sample x batch / (peak x MFU)."""
    return flops_per_sample * batch / (peak_tflops * 1e12 * mfu) * 1e3


@dataclass(frozen=True)
class ScalingPoint:
    gpus: int
    bus_bandwidth_factor: float
    allreduce_ms: float  # all buckets, back to back, nothing hidden
    last_bucket_ms: float
    compute_ms: float | None  # None when neither --step-ms nor a GPU and FLOPs were given
    backward_ms: float | None
    exposed_comm_ms: float | None
    step_ms: float | None
    samples_per_s: float | None  # needs a batch size
    speedup: float | None
    efficiency: float | None
    ddp_mb_per_gpu_per_step: float
    dataparallel_gpu0_mb_per_step: float
    dataparallel_gpu0_ms: float  # GPU 0's traffic over one link's bandwidth
    steps_per_epoch: int | None  # needs --samples and a batch size
    ddp_gb_per_gpu_per_epoch: float | None
    dataparallel_gpu0_gb_per_epoch: float | None
    dataparallel_gb_per_link_per_epoch: float | None  # seed 004's "2 transfers x batches"


@dataclass(frozen=True)
class ScalingPlan:
    gradient_bytes: float
    buckets: int
    points: tuple[ScalingPoint, ...]
    choke: str  # "gpu", "network" or "unknown"
    verdict: str
    reason: str


def _bucket_sizes(gradient_bytes: float, bucket_bytes: float) -> tuple[int, float]:
    """How many buckets, and the size of the last one (the remainder, or a full bucket)."""
    buckets = max(1, math.ceil(gradient_bytes / bucket_bytes - 1e-9))
    return buckets, gradient_bytes - (buckets - 1) * bucket_bytes


def plan_scaling(
    params: float,
    max_gpus: int,
    bandwidth: float,
    *,
    bytes_per_param: float = 4.0,
    latency_s: float = 0.0,
    step_ms: float | None = None,
    batch: float | None = None,
    strong_scaling: bool = False,
    samples: float | None = None,
    bucket_bytes: float = DEFAULT_BUCKET_BYTES,
    backward_fraction: float = BACKWARD_FRACTION,
) -> ScalingPlan:
    """Step time and speedup at N = 1, 2, 4, ..., max_gpus.

    `step_ms` is one GPU's compute per step: for its per-GPU `batch` (weak scaling, the
    default: every GPU keeps its batch, the global batch grows with N) or for the whole global
    `batch` (strong scaling: the batch is split, compute falls as 1/N)."""
    if params <= 0:
        raise PlanError(f"--params must be positive, got {params:g}")
    for value, flag in (
        (bytes_per_param, "--bytes-per-param"),
        (bucket_bytes, "--bucket-mb"),
        (step_ms, "--step-ms"),
        (batch, "--batch"),
        (samples, "--samples"),
    ):
        if value is not None and not value > 0:
            raise PlanError(f"{flag} must be positive, got {value:g}")
    if latency_s < 0:
        raise PlanError(f"--latency-us must not be negative, got {latency_s * 1e6:g}")
    if samples is not None and batch is None:
        raise PlanError("--samples needs --batch to count steps per epoch")
    grad_bytes = params * bytes_per_param
    buckets, last_bytes = _bucket_sizes(grad_bytes, bucket_bytes)

    points: list[ScalingPoint] = []
    for n in gpu_counts(max_gpus):
        bw_part = bus_bandwidth_factor(n) * grad_bytes / bandwidth
        per_bucket_latency = 2 * (n - 1) * latency_s
        allreduce = bw_part + buckets * per_bucket_latency
        last = ring_allreduce_seconds(last_bytes, n, bandwidth, latency_s)
        compute = backward = exposed = step = None
        if step_ms is not None:
            compute = step_ms / n if strong_scaling else step_ms
            backward = compute * backward_fraction
            exposed = max(0.0, (allreduce - last) * 1e3 - backward) + last * 1e3
            step = compute + exposed
        global_batch = None if batch is None else (batch if strong_scaling else batch * n)
        steps = None
        if samples is not None and global_batch is not None:
            steps = math.ceil(samples / global_batch - 1e-9)
        dp_gpu0_bytes = 2 * (n - 1) * params * bytes_per_param
        ddp_bytes = bus_bandwidth_factor(n) * grad_bytes
        points.append(
            ScalingPoint(
                gpus=n,
                bus_bandwidth_factor=bus_bandwidth_factor(n),
                allreduce_ms=allreduce * 1e3,
                last_bucket_ms=last * 1e3,
                compute_ms=compute,
                backward_ms=backward,
                exposed_comm_ms=exposed,
                step_ms=step,
                samples_per_s=None
                if step is None or global_batch is None
                else global_batch / step * 1e3,
                speedup=None,
                efficiency=None,
                ddp_mb_per_gpu_per_step=ddp_bytes / 1e6,
                dataparallel_gpu0_mb_per_step=dp_gpu0_bytes / 1e6,
                dataparallel_gpu0_ms=dp_gpu0_bytes / bandwidth * 1e3,
                steps_per_epoch=steps,
                ddp_gb_per_gpu_per_epoch=None if steps is None else ddp_bytes * steps / 1e9,
                dataparallel_gpu0_gb_per_epoch=None
                if steps is None
                else dp_gpu0_bytes * steps / 1e9,
                dataparallel_gb_per_link_per_epoch=None
                if steps is None or n < 2
                else 2 * params * bytes_per_param * steps / 1e9,
            )
        )
    points = _with_speedups(points, strong_scaling)
    choke, verdict, reason = scaling_verdict(points)
    return ScalingPlan(grad_bytes, buckets, tuple(points), choke, verdict, reason)


def _with_speedups(points: list[ScalingPoint], strong_scaling: bool) -> list[ScalingPoint]:
    """Speedup = throughput(N) / throughput(1): N x step(1) / step(N) when every GPU keeps its
    batch, step(1) / step(N) when the global batch is split."""
    base = points[0].step_ms
    if base is None:
        return points
    out = []
    for p in points:
        assert p.step_ms is not None
        speedup = base / p.step_ms * (1 if strong_scaling else p.gpus)
        out.append(replace(p, speedup=speedup, efficiency=speedup / p.gpus))
    return out


def scaling_verdict(points: list[ScalingPoint]) -> tuple[str, str, str]:
    """Seed 004's rule with thresholds: a network choke when the last step up (e.g. 4 -> 8
    GPUs) bought less than 20% of its ideal gain (a doubling under 1.2x), or when efficiency at
    the largest N is below 50% (each GPU waits on the network longer than it computes, so a
    faster link buys more than more GPUs); otherwise a GPU choke: compute dominates, add GPUs.
    Returns (choke, verdict, reason), the reason naming the threshold that decided."""
    last = points[-1]
    if last.speedup is None or last.efficiency is None:
        return (
            "unknown",
            "unknown: give --step-ms (or --gpu, --flops-per-sample and --batch) for a verdict",
            f"the all-reduce alone takes {last.allreduce_ms:.3g} ms per step at {last.gpus} GPUs",
        )
    if len(points) < 2:
        return "unknown", "unknown: one GPU, nothing to scale", "give --gpus 2 or more"
    prev = points[-2]
    assert prev.speedup is not None
    ratio, ideal = last.speedup / prev.speedup, last.gpus / prev.gpus
    marginal = (ratio - 1) / (ideal - 1)
    step_up = f"{prev.gpus} -> {last.gpus} GPUs gives {ratio:.2f}x of an ideal {ideal:.2g}x"
    efficiency = f"efficiency {last.efficiency:.0%} at {last.gpus} GPUs"
    if marginal < MARGINAL_GAIN_FLOOR:
        return "network", "network choke: adding GPUs will not help", f"{step_up}; {efficiency}"
    if last.efficiency < EFFICIENCY_FLOOR:
        reason = (
            f"{efficiency}: the GPUs wait on the network longer than they compute, "
            f"so a faster link buys more than more GPUs; {step_up}"
        )
        return "network", "network choke: adding GPUs will not help", reason
    return "gpu", "GPU choke: add GPUs", f"{efficiency}; {step_up}"
