"""Training memory per GPU: mixed-precision Adam model states, ZeRO stages 0-3, activations.

Model states (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion
Parameter Models", section 3.1): mixed-precision Adam keeps, per parameter, 2 bytes of fp16/bf16
weights, 2 bytes of fp16/bf16 gradients and K = 12 bytes of optimizer state (fp32 master weights,
Adam momentum and variance, 4 bytes each): 16 bytes per parameter. With N data-parallel GPUs:

    stage 0 (none)          16 P
    stage 1 (optimizer)      4 P + 12 P / N
    stage 2 (+ gradients)    2 P + 14 P / N
    stage 3 (+ parameters)        16 P / N

The paper's own example, 7.5B parameters on 64 GPUs: 120, 31.4, 16.6 and 1.9 GB per GPU.

Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models", section 4.1), per transformer layer with 16-bit activations and no tensor or sequence
parallelism: s b h (34 + 5 a s / h) bytes, s the sequence length, b the micro-batch, h the hidden
size, a the attention heads. The 5 a s / h term is the attention scores (softmax, dropout);
selective recomputation (their section 5; FlashAttention has the same effect) drops it: 34 s b h.
With full recomputation only each layer's input is kept: 2 s b h.
ZeRO does not shard activations: every data-parallel GPU holds its own micro-batch's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

GB = 1e9  # decimal, as the ZeRO paper's 120 GB for 7.5B parameters is
PARAM_BYTES = 2.0  # fp16/bf16 weights
GRAD_BYTES = 2.0  # fp16/bf16 gradients
OPTIMIZER_BYTES = 12.0  # ZeRO's K: fp32 master weights + Adam m + Adam v
ZERO_STAGES = (0, 1, 2, 3)
STAGE_NAMES = {0: "none", 1: "zero1", 2: "zero2", 3: "zero3"}
STAGE_SHARDS = {  # what each stage partitions over the data-parallel GPUs
    0: "nothing",
    1: "optim",
    2: "optim+grads",
    3: "optim+grads+params",
}
DEFAULT_HEADROOM = 0.9  # usable fraction of a GPU's memory: CUDA context, fragmentation


@dataclass(frozen=True)
class StageMemory:
    """GB per GPU for one ZeRO stage on `gpus` data-parallel GPUs."""

    stage: int
    name: str
    params_gb: float
    grads_gb: float
    optimizer_gb: float
    model_states_gb: float
    activations_gb: float
    total_gb: float


@dataclass(frozen=True)
class GpuFit:
    """Whether one GPU model holds the chosen stage, and the fewest GPUs each stage needs."""

    name: str
    memory_gb: float
    usable_gb: float
    fits: bool  # at the chosen stage and GPU count
    min_gpus: dict[str, int | None]  # per stage name; None: no GPU count is enough


@dataclass(frozen=True)
class MemoryPlan:
    params: float
    gpus: int
    zero_stage: int
    activations_gb: float
    headroom: float
    gb_per_gpu: float  # total at the chosen stage
    gb_per_gpu_by_stage: dict[str, float]
    stages: tuple[StageMemory, ...]
    fits: tuple[GpuFit, ...]


def _split_bytes(stage: int) -> tuple[float, float]:
    """(bytes per parameter every GPU keeps whole, bytes per parameter split over the GPUs)."""
    per_state = (PARAM_BYTES, GRAD_BYTES, OPTIMIZER_BYTES)
    # Stages shard from the optimizer backwards: 1 -> optimizer, 2 -> + grads, 3 -> + params.
    sharded = sum(per_state[3 - stage :]) if stage else 0.0
    return sum(per_state) - sharded, sharded


def stage_memory(params: float, gpus: int, stage: int, activations_gb: float = 0.0) -> StageMemory:
    """GB per GPU of model states (ZeRO, Rajbhandari et al. 2020) plus activations at `stage`."""
    if stage not in ZERO_STAGES:
        raise ValueError(f"ZeRO stage must be 0-3, got {stage}")
    n = float(gpus)
    shard_p = params / n if stage >= 3 else params
    shard_g = params / n if stage >= 2 else params
    shard_o = params / n if stage >= 1 else params
    params_gb = PARAM_BYTES * shard_p / GB
    grads_gb = GRAD_BYTES * shard_g / GB
    optimizer_gb = OPTIMIZER_BYTES * shard_o / GB
    states = params_gb + grads_gb + optimizer_gb
    return StageMemory(
        stage=stage,
        name=STAGE_NAMES[stage],
        params_gb=params_gb,
        grads_gb=grads_gb,
        optimizer_gb=optimizer_gb,
        model_states_gb=states,
        activations_gb=activations_gb,
        total_gb=states + activations_gb,
    )


def activation_gb(
    layers: int, hidden: int, seq: int, micro_batch: int, heads: int, recompute: str = "none"
) -> float:
    """GB of activations per GPU (Korthikanti et al. 2022, section 4.1, 16-bit activations).

    Per layer: s b h (34 + 5 a s / h) bytes without recomputation; 34 s b h with selective
    recomputation (attention scores recomputed, or never stored, as with FlashAttention);
    2 s b h with full recomputation (only the layer input is stored).
    """
    sbh = float(seq) * micro_batch * hidden
    if recompute == "full":
        per_layer = 2.0 * sbh
    elif recompute == "selective":
        per_layer = 34.0 * sbh
    elif recompute == "none":
        per_layer = sbh * (34.0 + 5.0 * heads * seq / hidden)
    else:
        raise ValueError(f"recompute must be 'none', 'selective' or 'full', got {recompute!r}")
    return layers * per_layer / GB


def min_gpus(
    params: float, stage: int, usable_gb: float, activations_gb: float = 0.0
) -> int | None:
    """Fewest data-parallel GPUs with `usable_gb` each that hold `stage`; None if none do.

    Solves whole + sharded / N + activations <= usable for the smallest integer N >= 1.
    """
    whole, sharded = _split_bytes(stage)
    room = usable_gb - activations_gb - whole * params / GB
    if room <= 0:
        return None
    if sharded == 0:
        return 1
    # The tiny slack keeps an exact fit (e.g. 16 P / N == room) from rounding up by one.
    return max(1, math.ceil(sharded * params / GB / room - 1e-9))


def memory_plan(
    params: float,
    gpus: int,
    zero_stage: int,
    activations_gb: float = 0.0,
    gpu_memory_gb: Sequence[tuple[str, float]] = (),
    headroom: float = DEFAULT_HEADROOM,
) -> MemoryPlan:
    """Every stage's GB per GPU, and for each (name, memory GB) GPU whether the chosen stage fits
    in memory x headroom and the fewest GPUs each stage needs."""
    stages = tuple(stage_memory(params, gpus, s, activations_gb) for s in ZERO_STAGES)
    chosen = stages[zero_stage]
    fits = []
    for name, memory_gb in gpu_memory_gb:
        usable = memory_gb * headroom
        fits.append(
            GpuFit(
                name=name,
                memory_gb=memory_gb,
                usable_gb=usable,
                fits=chosen.total_gb <= usable,
                min_gpus={
                    STAGE_NAMES[s]: min_gpus(params, s, usable, activations_gb) for s in ZERO_STAGES
                },
            )
        )
    return MemoryPlan(
        params=params,
        gpus=gpus,
        zero_stage=zero_stage,
        activations_gb=activations_gb,
        headroom=headroom,
        gb_per_gpu=chosen.total_gb,
        gb_per_gpu_by_stage={s.name: s.total_gb for s in stages},
        stages=stages,
        fits=tuple(fits),
    )
