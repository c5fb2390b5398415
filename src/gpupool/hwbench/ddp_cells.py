"""What the DDP sweep measures, as data shared by the sweep's driver (ddp_sweep.py, no torch)
and its ranks (ddp_measure.py, torch): the plan of one sweep and one measured cell."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

# Seed 004's batch sizes: the global batch of one step (DataParallel splits it over its GPUs;
# each DDP rank takes batch // ranks, so both modes do the same work per step).
SEED_BATCH_SIZES = (10, 20, 30, 50, 70, 100, 150, 200, 300, 400, 500, 600)
TINY_BATCH_SIZES = (10, 40)


class Mode(StrEnum):
    DP = "dp"  # torch.nn.DataParallel: one process drives every GPU
    DDP = "ddp"  # torch.nn.parallel.DistributedDataParallel: one process (rank) per GPU


@dataclass(frozen=True)
class SweepSpec:
    models: tuple[str, ...]  # names in seed004.MODELS
    batch_sizes: tuple[int, ...]  # global batch per step
    length: int  # input samples per example: 12,000 (seed 004) or 1,200 (--tiny)
    device: str  # "cuda" or "cpu"
    steps: int  # timed steps per cell
    warmup: int  # untimed steps before them
    lr: float = 1e-3

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SweepSpec:
        """What `dataclasses.asdict` of one gave (the spawned ranks' argument)."""
        return cls(
            models=tuple(str(m) for m in data["models"]),
            batch_sizes=tuple(int(b) for b in data["batch_sizes"]),
            length=int(data["length"]),
            device=str(data["device"]),
            steps=int(data["steps"]),
            warmup=int(data["warmup"]),
            lr=float(data["lr"]),
        )


@dataclass(frozen=True)
class Cell:
    """One measurement: `model` trained in `mode` on `gpus` GPUs (ranks) at global `batch`."""

    mode: Mode
    model: str
    params: int
    gpus: int
    batch: int  # the global batch asked for
    samples_per_step: int  # what ran: batch // gpus per rank x gpus for DDP, batch for DP
    step_s: float  # mean seconds per step (DDP: the slowest rank's)
    loss: float  # mean loss over the timed steps (DDP: averaged over ranks)
    replicas_agree: bool | None = None  # DDP: every rank ends with the same parameters

    @property
    def samples_per_s(self) -> float:
        return self.samples_per_step / self.step_s if self.step_s > 0 else 0.0
