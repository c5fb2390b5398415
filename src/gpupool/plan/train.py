"""Training time, cost and energy from 6 x params x tokens; compute-optimal model sizes.

Training compute (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", section 2.1):
C = 6 N D FLOPs for N parameters and D tokens: 2 N per token forward, 4 N backward.

Wall-clock time: C / (GPUs x peak FLOP/s x MFU), where MFU (model FLOPs utilization, Chowdhery et
al. 2022, PaLM, section 4.1 and appendix B) is the fraction of the dense peak the run sustains.
GPT-3 (175B parameters, 300B tokens): 3.15e23 FLOPs, 28.5 days on 1,024 A100 (312 TFLOPS BF16)
at 40%.

Compute-optimal size (Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models",
Chinchilla): about 20 tokens per parameter, so with D = 20 N and C = 6 N D,
N_opt = sqrt(C / 120) and D_opt = 20 N_opt. Chinchilla itself: 70B parameters, 1.4T tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FLOPS_PER_PARAM_TOKEN = 6.0  # Kaplan et al. 2020: 2 forward + 4 backward
CHINCHILLA_TOKENS_PER_PARAM = 20.0  # Hoffmann et al. 2022
SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True)
class TrainTime:
    flops: float
    gpus: int
    peak_tflops: float
    mfu: float
    seconds: float
    hours: float
    days: float
    gpu_hours: float
    cost_usd: float | None  # None without a $/GPU-hour
    energy_kwh: float | None  # GPU board power only; None without a TDP


@dataclass(frozen=True)
class ComputeOptimal:
    budget_flops: float
    tokens_per_param: float
    params_opt: float
    tokens_opt: float


def training_flops(params: float, tokens: float) -> float:
    """C = 6 N D (Kaplan et al. 2020)."""
    return FLOPS_PER_PARAM_TOKEN * params * tokens


def sustained_flops(gpus: int, peak_tflops: float, mfu: float) -> float:
    """FLOP/s the whole run delivers: GPUs x dense peak x MFU."""
    return gpus * peak_tflops * 1e12 * mfu


def train_time(
    flops: float,
    gpus: int,
    peak_tflops: float,
    mfu: float,
    usd_per_gpu_hour: float | None = None,
    tdp_w: float | None = None,
) -> TrainTime:
    """Time = C / (GPUs x peak x MFU); GPU-hours, cost at $/GPU-hour, energy = GPUs x TDP x hours.

    Energy counts the GPUs at their TDP for the whole run: an upper bound on board power that
    leaves out CPUs, network, cooling (PUE) and idle time.
    """
    seconds = flops / sustained_flops(gpus, peak_tflops, mfu)
    hours = seconds / SECONDS_PER_HOUR
    gpu_hours = gpus * hours
    return TrainTime(
        flops=flops,
        gpus=gpus,
        peak_tflops=peak_tflops,
        mfu=mfu,
        seconds=seconds,
        hours=hours,
        days=seconds / SECONDS_PER_DAY,
        gpu_hours=gpu_hours,
        cost_usd=None if usd_per_gpu_hour is None else gpu_hours * usd_per_gpu_hour,
        energy_kwh=None if tdp_w is None else gpu_hours * tdp_w / 1000.0,
    )


def budget_from_gpu_days(gpus: int, days: float, peak_tflops: float, mfu: float) -> float:
    """The FLOPs `gpus` GPUs deliver in `days` at `mfu` of their dense peak."""
    return sustained_flops(gpus, peak_tflops, mfu) * days * SECONDS_PER_DAY


def compute_optimal(
    budget_flops: float, tokens_per_param: float = CHINCHILLA_TOKENS_PER_PARAM
) -> ComputeOptimal:
    """Chinchilla (Hoffmann et al. 2022): D = r N and C = 6 N D give N = sqrt(C / 6r), D = r N."""
    params = math.sqrt(budget_flops / (FLOPS_PER_PARAM_TOKEN * tokens_per_param))
    return ComputeOptimal(
        budget_flops=budget_flops,
        tokens_per_param=tokens_per_param,
        params_opt=params,
        tokens_opt=tokens_per_param * params,
    )


def compute_optimal_tokens(
    params: float, tokens_per_param: float = CHINCHILLA_TOKENS_PER_PARAM
) -> float:
    """The tokens a model of `params` parameters should see to be compute-optimal: r N."""
    return tokens_per_param * params


def gpu_count_sweep(gpus: int, span: int = 3) -> tuple[int, ...]:
    """Powers of two around `gpus` (x1/8 .. x8 by default), and `gpus` itself, for a sweep."""
    counts = {gpus}
    for k in range(-span, span + 1):
        scaled = gpus * 2.0**k
        if scaled >= 1:
            counts.add(round(scaled))
    return tuple(sorted(counts))
