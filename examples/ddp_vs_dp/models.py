"""Seed 004's two models and its synthetic data: a 12.1M-parameter MLP and a 376k-parameter
1-D CNN on 12,000-sample inputs with 10 classes (``--tiny``: 1,200 samples, for the CPU).

The models, the data and the training loop live in gpupool.hwbench.seed004 (the same ones
`gpupool bench ddp-sweep` measures); this module adds the scripts' command line."""

from __future__ import annotations

import argparse

from gpupool.hwbench.seed004 import (
    CLASSES,
    FULL_LENGTH,
    MODELS,
    TINY_LENGTH,
    cnn,
    mlp,
    synthetic,
    train_epoch,
)

__all__ = [
    "CLASSES",
    "FULL_LENGTH",
    "MODELS",
    "TINY_LENGTH",
    "arguments",
    "cnn",
    "mlp",
    "synthetic",
    "train_epoch",
]


def arguments(description: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--model", choices=sorted(MODELS), default="mlp")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64, help="per process (DDP) / in all (DP)")
    p.add_argument("--samples", type=int, default=4096)
    p.add_argument("--steps", type=int, default=0, help="stop each epoch after this many (0: all)")
    p.add_argument("--tiny", action="store_true", help="1,200-sample inputs: quick on a CPU")
    p.add_argument("--lr", type=float, default=1e-3)
    return p.parse_args()
