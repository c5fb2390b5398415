"""Seed 004's two models and its synthetic data ("Characterizing Multi-GPU Data Parallel NN
Training"): a 12.1M-parameter MLP and a 376k-parameter 1-D CNN on 12,000-sample inputs with 10
classes (1,200-sample inputs for the CPU's tiny runs).

Shared by `gpupool bench ddp-sweep` (ddp_sweep.py) and examples/ddp_vs_dp/, so the benchmark
measures exactly the models the example trains. This module imports torch at its top: import
it only where torch is wanted (inside a benchmark's `run`, or a training script).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import torch
from torch import nn
from torch.utils.data import TensorDataset

FULL_LENGTH = 12_000
TINY_LENGTH = 1_200
CLASSES = 10


def mlp(length: int = FULL_LENGTH) -> nn.Module:
    """12,102,220 parameters at 12,000 inputs."""
    return nn.Sequential(
        nn.Linear(length, 1000), nn.ReLU(),
        nn.Linear(1000, 100), nn.ReLU(),
        nn.Linear(100, CLASSES), nn.Sigmoid(),
        nn.Linear(CLASSES, CLASSES),
    )  # fmt: skip


def cnn(length: int = FULL_LENGTH) -> nn.Module:
    """376,200 parameters at 12,000 inputs: three conv/pool stages, then two linear layers."""
    return nn.Sequential(
        nn.Unflatten(1, (1, length)),
        nn.Conv1d(1, 50, 200, padding=100), nn.ReLU(), nn.MaxPool1d(4),
        nn.Conv1d(50, 30, 100, padding=50), nn.ReLU(), nn.MaxPool1d(3),
        nn.Conv1d(30, 10, 50, padding=25), nn.ReLU(), nn.MaxPool1d(5),
        nn.Flatten(),
        nn.Linear(10 * (length // 60), 100), nn.Sigmoid(),
        nn.Linear(100, CLASSES),
    )  # fmt: skip


MODELS: dict[str, Callable[[int], nn.Module]] = {"mlp": mlp, "cnn": cnn}


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def synthetic(samples: int, length: int, seed: int = 0) -> TensorDataset:
    """Random inputs whose class is carried by the mean of one tenth of the signal."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (samples,), generator=g)
    x = torch.randn(samples, length, generator=g)
    chunk = length // CLASSES
    for c in range(CLASSES):
        rows = labels == c
        x[rows, c * chunk : (c + 1) * chunk] += 1.0
    return TensorDataset(x, labels)


def train_epoch(
    model: nn.Module,
    loader: Iterable[tuple[torch.Tensor, torch.Tensor]],
    opt: torch.optim.Optimizer,
    device: torch.device,
    max_steps: int = 0,
) -> tuple[int, float, float]:
    """One epoch (at most `max_steps` steps; 0: all): (steps, mean loss, seconds). The same
    loop for DDP and DataParallel: only the wrapping of `model` and the loader differ. Each
    step reads its loss back (`loss.item()`), so on CUDA the seconds include the last kernel."""
    loss_fn = nn.CrossEntropyLoss()
    start, steps, total = time.perf_counter(), 0, 0.0
    for x, y in loader:
        opt.zero_grad()
        loss = loss_fn(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        steps, total = steps + 1, total + loss.item()
        if max_steps and steps >= max_steps:
            break
    return steps, total / max(steps, 1), time.perf_counter() - start
