"""Containers as the job spec names them (`--image`, `--container-engine`; docs/containers.md).

The engines gpupool can run an image with, the order it prefers them in when the spec names
none, and the one rule that picks the engine at submit from those installed on the pool's
machine. Standard library only: core/job.py (JobSpec) and the spec rules import it.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import StrEnum

from gpupool.core.values import FrozenValue


class ContainerEngine(StrEnum):
    """The program that runs a job's image (its executable has the same name)."""

    PODMAN = "podman"
    DOCKER = "docker"
    APPTAINER = "apptainer"


# Auto-detection takes the first installed, in this order: podman (daemonless, CDI for
# GPUs, rootless or rootful), then docker, then apptainer (HPC sites).
ENGINE_PREFERENCE: tuple[ContainerEngine, ...] = (
    ContainerEngine.PODMAN,
    ContainerEngine.DOCKER,
    ContainerEngine.APPTAINER,
)


class EngineRefused(FrozenValue):
    """Why a job's image cannot run on this pool: the spec field to blame and the words.
    A FrozenValue, not a frozen dataclass: the spec rules import this module on every
    `gpupool submit` (core/values.py says why)."""

    __slots__ = ("field", "message")
    field: str  # "image" or "container_engine"
    message: str

    def __init__(self, field: str, message: str) -> None:
        object.__setattr__(self, "field", field)
        object.__setattr__(self, "message", message)


def choose_engine(
    requested: ContainerEngine | None, installed: Collection[ContainerEngine]
) -> ContainerEngine | EngineRefused:
    """The engine a job with an image runs with: the one it names if installed, else the
    first of ENGINE_PREFERENCE that is; EngineRefused when there is none to use."""
    have = ", ".join(e.value for e in ENGINE_PREFERENCE if e in installed) or "none"
    if requested is not None:
        if requested in installed:
            return requested
        return EngineRefused(
            "container_engine",
            f"{requested.value} is not installed on the pool's machine (installed: {have})",
        )
    for engine in ENGINE_PREFERENCE:
        if engine in installed:
            return engine
    names = ", ".join(e.value for e in ENGINE_PREFERENCE)
    return EngineRefused(
        "image", f"no container engine ({names}) is installed on the pool's machine"
    )
