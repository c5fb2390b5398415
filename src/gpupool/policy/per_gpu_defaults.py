"""The pool's memory and CPUs per GPU, given at submit to jobs that do not ask for them.

As Slurm's DefMemPerGPU and DefCpuPerGPU: with `gpupool server --default-mem-per-gpu SIZE
--default-cpus-per-gpu N` (both off unless set), a job that asks for GPUs and says nothing
about memory (`--mem`) is given SIZE x its GPUs, one that says nothing about CPUs (`--cpus`)
N x its GPUs. A share of a GPU (`--gpus 0.5`, `--gpu-memory`) counts as 1 GPU; a job with no
GPU is given nothing. What the job says itself always wins, each figure on its own.

It is applied once, at submit (`PoolService.submission`, the one place every submission goes
through: single, batch, array, SDK), and written into the job's request, so placement counts
it and the executor enforces it like the job's own `--mem`/`--cpus`; the job's history says
which figures came from the pool (`Defaulted`, rendered by `render.defaulted_text`). A later
change of the defaults, or `gpupool update --gpus`, does not change a queued job's figures.

A default must never make a job impossible: each figure is capped at the largest one among
the nodes that could run the job as it asked (its GPUs, of its type, and its own CPUs and
memory), CPUs first, then memory among the nodes that also have the CPUs it was given (as
`feasibility.check_satisfiable` checks them). A node that does not declare a figure (0) is
not checked for it, so it caps nothing. docs/scheduling.md, "Memory and CPUs per GPU".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpupool.core.hardware import Node
from gpupool.core.job import Resources
from gpupool.policy.filters.gpu_type import matching_gpus
from gpupool.policy.node_free import granted_bytes
from gpupool.policy.reasons import Dimension


@dataclass(frozen=True)
class PerGpuDefaults:
    """The pool's defaults per GPU; None: off (the job's request is left as it is)."""

    mem_bytes: int | None = None  # --default-mem-per-gpu
    cpus: int | None = None  # --default-cpus-per-gpu

    def __post_init__(self) -> None:
        if self.mem_bytes is not None and self.mem_bytes <= 0:
            raise ValueError(f"--default-mem-per-gpu: must be more than 0, got {self.mem_bytes}")
        if self.cpus is not None and self.cpus < 1:
            raise ValueError(f"--default-cpus-per-gpu: must be at least 1, got {self.cpus}")

    @property
    def off(self) -> bool:
        return self.mem_bytes is None and self.cpus is None


@dataclass(frozen=True)
class Defaulted:
    """One figure a job was given by the pool: `value` of `dimension` (CPUS or MEMORY, in
    bytes), from `per_gpu` x `gpus`, or less: capped at node `capped_by`'s figure."""

    dimension: Dimension
    value: int
    per_gpu: int
    gpus: int
    capped_by: str | None = None


@dataclass(frozen=True)
class WithDefaults:
    """A request with the pool's defaults applied, and the figures they gave (none: the
    request is the one that was given, the same object)."""

    resources: Resources
    given: tuple[Defaulted, ...] = ()


def apply_per_gpu_defaults(
    res: Resources, defaults: PerGpuDefaults, nodes: Sequence[Node]
) -> WithDefaults:
    """`res` with the pool's defaults for what it does not say (the module's rule)."""
    gpus = 1 if res.fractional else res.gpus
    wants_cpus = res.cpus is None and defaults.cpus is not None
    wants_mem = res.mem_bytes is None and defaults.mem_bytes is not None
    if gpus <= 0 or not (wants_cpus or wants_mem):
        return WithDefaults(res)
    candidates = [n for n in nodes if _could_run(n, res)]
    # CPUs are settled first (module docstring); `given` says memory first, as `show` does.
    given: list[Defaulted] = []
    if wants_cpus:
        assert defaults.cpus is not None
        cpus = _capped(Dimension.CPUS, defaults.cpus, gpus, candidates)
        given.append(cpus)
        res = dataclasses.replace(res, cpus=cpus.value)
    if wants_mem:
        assert defaults.mem_bytes is not None
        have_cpus = [n for n in candidates if _fits(n.cpus, res.cpus)]
        mem = _capped(Dimension.MEMORY, defaults.mem_bytes, gpus, have_cpus)
        given.insert(0, mem)
        res = dataclasses.replace(res, mem_bytes=mem.value)
    return WithDefaults(res, tuple(given))


def per_gpu_default_caps(
    defaults: PerGpuDefaults, nodes: Sequence[Node]
) -> tuple[tuple[Dimension, str, int], ...]:
    """(dimension, node, its figure) for each node that declares less than the default for
    all its GPUs: a job taking them all there is given that figure, not the default's (what
    the daemon's start line names)."""
    caps = []
    for n in nodes:
        gpus = len(n.gpus)
        if defaults.cpus is not None and 0 < n.cpus < defaults.cpus * gpus:
            caps.append((Dimension.CPUS, n.name, n.cpus))
        if defaults.mem_bytes is not None and 0 < n.memory_bytes < defaults.mem_bytes * gpus:
            caps.append((Dimension.MEMORY, n.name, n.memory_bytes))
    return tuple(caps)


def _capped(dimension: Dimension, per_gpu: int, gpus: int, candidates: list[Node]) -> Defaulted:
    """per_gpu x gpus, at most the largest figure among `candidates` (none of them, or one
    that does not declare it: not capped)."""
    want = per_gpu * gpus
    figure = _figure(dimension)
    if not candidates or any(figure(n) == 0 for n in candidates):
        return Defaulted(dimension, want, per_gpu, gpus)
    # Ties go to the first name, so the answer does not depend on the order nodes came in.
    top = max(sorted(candidates, key=lambda n: n.name), key=figure)
    if want <= figure(top):
        return Defaulted(dimension, want, per_gpu, gpus)
    return Defaulted(dimension, figure(top), per_gpu, gpus, capped_by=top.name)


def _figure(dimension: Dimension) -> Callable[[Node], int]:
    """A node's declared CPUs or memory (0: not declared)."""
    if dimension is Dimension.CPUS:
        return lambda n: n.cpus
    return lambda n: n.memory_bytes


def _could_run(n: Node, res: Resources) -> bool:
    """Could `n` run the job as it asked, on an empty pool (feasibility's per-node rule)?"""
    matching = matching_gpus(n, res)
    if res.fractional:
        room = any(
            granted_bytes(n, g, res) <= n.gpu(g).memory_bytes - n.gpu(g).unmanaged_memory_bytes
            for g in matching
        )
    else:
        room = len(matching) >= res.gpus
    return room and _fits(n.cpus, res.cpus) and _fits(n.memory_bytes, res.mem_bytes)


def _fits(have: int, asked: int | None) -> bool:
    """A node's figure admits a request: not asked, not declared (0), or enough."""
    return not asked or have == 0 or have >= asked
