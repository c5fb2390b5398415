"""A benchmark module by its registry name, as a typed value (the contract in __init__.py).

A module the registry names but this installation lacks (written in a later change) is
`None`, so `gpupool bench NAME` can say it is not available instead of failing; any other
import error (a bug in the module) is raised.
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass
from typing import Protocol, cast

from gpupool.hwbench.registry import BENCHMARKS
from gpupool.hwbench.result import BenchResult, Progress


class _Module(Protocol):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace, progress: Progress) -> BenchResult: ...


@dataclass(frozen=True)
class Benchmark:
    name: str
    module: _Module
    # True when it must run as one process per GPU (the module's `DISTRIBUTED = True`):
    # `--gpus N` then submits it with `--distributed torchrun` (docs/distributed.md).
    distributed: bool
    summary: str  # the first line of the module's docstring
    # False when it runs without PyTorch (the module's `NEEDS_TORCH = False`: storage):
    # `--gpus N` checks for torch here before it queues a job bound to fail without it.
    needs_torch: bool = True


def load(name: str) -> Benchmark | None:
    """The benchmark `name` (a key of BENCHMARKS); None when its module is not installed.
    KeyError for a name the registry does not have."""
    dotted = BENCHMARKS[name]
    try:
        module = importlib.import_module(dotted)
    except ModuleNotFoundError as exc:
        if exc.name == dotted:
            return None
        raise
    doc = (module.__doc__ or "").strip().splitlines()
    if doc and doc[0].startswith("`") and "`: " in doc[0]:  # "`gpupool bench x`: what it is"
        doc[0] = doc[0].split("`: ", 1)[1]
    return Benchmark(
        name=name,
        module=cast(_Module, module),
        distributed=bool(getattr(module, "DISTRIBUTED", False)),
        summary=doc[0] if doc else name,
        needs_torch=bool(getattr(module, "NEEDS_TORCH", True)),
    )
