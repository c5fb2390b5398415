"""Where a submission runs (docs/backends.md): on the pool's own machine, or handed to one
of the daemon's backends. Pure: the daemon's backends and the project's default in, the
spec with its `backend` settled (None: the local pool) or a refusal naming the field out.

A backend's job is not checked against the local inventory or quotas: its backend's
scheduler decides what can run there. What is refused at submit is what the backend
declares it cannot do (`Capabilities`), and what the local pool can never do. A share of
one GPU goes to a backend that shares GPUs by fraction (Ray), as a fraction (`--gpus 0.5`)
only: an amount of GPU memory (`--gpu-memory`) runs only on the local pool.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from gpupool.core.backends import ANY_BACKEND, LOCAL_BACKEND, Backend
from gpupool.core.execution import Capabilities
from gpupool.core.job import JobSpec, Resources


@dataclass(frozen=True)
class Refusal:
    code: str  # the API's refusal code
    message: str  # "FIELD: problem", as every spec error


def settle_backend(
    spec: JobSpec, project_default: str | None, backends: Mapping[str, Backend]
) -> JobSpec | Refusal:
    """`spec` with its backend settled: the one it names, else its project's default, else
    the local pool (stored as None); a Refusal when it cannot run there."""
    chosen = spec.backend if spec.backend is not None else project_default
    configured = ", ".join(sorted(backends)) or "none"
    if chosen == ANY_BACKEND:
        return _anywhere(spec, backends)
    if chosen is None or chosen == LOCAL_BACKEND:
        if spec.nodes > 1:
            return Refusal(
                "multi_node_local",
                f"nodes: the local pool is one machine; use --backend NAME to run on "
                f"{spec.nodes} nodes (backends: {configured})",
            )
        return dataclasses.replace(spec, backend=None) if spec.backend is not None else spec
    backend = backends.get(chosen)
    if backend is None:
        return Refusal(
            "unknown_backend",
            f"backend: no backend named {chosen} in this pool (configured: {configured}; "
            "`gpupool backends` lists them)",
        )
    caps = backend.capabilities
    res = spec.resources
    if res.fractional:
        refusal = _share_refusal(chosen, caps, res)
        if refusal is not None:
            return refusal
    if spec.nodes > 1 and not caps.multi_node:
        return Refusal(
            "backend_cannot", f"nodes: backend {chosen} runs a job on one node, not {spec.nodes}"
        )
    if spec.image is not None and not caps.containers:
        return Refusal("backend_cannot", f"image: backend {chosen} runs no container images")
    if spec.backend != chosen:
        return dataclasses.replace(spec, backend=chosen)
    return spec


def _share_refusal(chosen: str, caps: Capabilities, res: Resources) -> Refusal | None:
    """A share of one GPU on backend `chosen`: a fraction where it shares GPUs by fraction
    (`Capabilities.fractional_gpus`: Ray), never an amount of GPU memory (no backend's
    engine holds a GPU's memory apart: Ray counts a GPU's share, not its bytes); None when
    it may run there. The field named is the one the user gave (`--gpus`, `--gpu-memory`)."""
    field = "gpus" if res.gpu_memory_bytes is None else "gpu_memory"
    if not caps.fractional_gpus:
        return Refusal(
            "backend_cannot",
            f"{field}: backend {chosen} gives whole GPUs; a share of one GPU runs only on the "
            "local pool (--backend local)",
        )
    if res.gpu_memory_bytes is not None:
        return Refusal(
            "backend_cannot",
            f"gpu_memory: backend {chosen} shares a GPU by fraction only: use --gpus 0.5 "
            "(a fraction of one GPU) instead of --gpu-memory",
        )
    return None


def _anywhere(spec: JobSpec, backends: Mapping[str, Backend]) -> JobSpec | Refusal:
    """`--backend any` (docs/backends.md "Where a job goes"): the job waits on the pool's
    machine and may be routed to any backend that can run it (`route_to`, by name), when
    that backend's admission would start it first; a job the pool's machine cannot run (a
    gang) goes to the first backend that can, the others its routes. Refused, with each
    place's reason, when none can run it."""
    places: list[str] = []
    reasons: list[str] = []
    for name in (LOCAL_BACKEND, *sorted(backends)):
        settled = settle_backend(dataclasses.replace(spec, backend=name), None, backends)
        if isinstance(settled, Refusal):
            reasons.append(settled.message)
        else:
            places.append(name)
    if not places:
        return Refusal("backend_cannot", "backend: no place can run it: " + "; ".join(reasons))
    first, *rest = places
    backend = None if first == LOCAL_BACKEND else first
    return dataclasses.replace(spec, backend=backend, route_to=tuple(rest))
