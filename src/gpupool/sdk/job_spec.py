"""`Job`: a job's spec as a Python value, checked when it is made by the spec parser the
CLI uses (gpupool.spec), so a bad field fails here, named, before anything is sent.

    Job(["python", "train.py"], gpus=2, time="4h", env={"WANDB_MODE": "offline"})

The fields are `gpupool submit`'s flags (README, `gpupool submit --help`), with the same
values: sizes as "32GB", durations as "2h" or "1-12:00:00" (or seconds), priority by name
or 0-1000. As with the CLI, the job gets this process's environment (minus what the pool
sets per job), its umask, and its working directory unless `workdir` says otherwise; these
are read when the Job is made.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from gpupool.spec.submitter import absolute_workdir, current_umask, submitter_environment

if TYPE_CHECKING:
    from gpupool.core.job import JobSpec
    from gpupool.core.json_types import JsonObject

# The SDK's defaults where the CLI has none: a job asks for a GPU and an hour unless told.
DEFAULT_GPUS = 1
DEFAULT_TIME = "1h"


class JobOptions(TypedDict, total=False):
    """Every field of `Job` but its command: what `submit_fn`, `map` and `@gpupool.job`
    take as keywords (tests/unit/test_sdk_job.py keeps the three in step with Job)."""

    gpus: int | float
    gpu_type: str | None
    gpu_memory: str | int | None
    cpus: int | None
    mem: str | int | None
    time: str | float | None
    begin: str | float | None
    name: str | None
    project: str | None
    priority: str | int | None
    preemptible: bool | None
    env: Mapping[str, str] | None
    workdir: str | None
    grace: str | float | None
    signal: str | None


# Job's fields that function jobs do not take: a function runs this interpreter on the host,
# with its call in your cache directory, neither of which is in an image (docs/sdk.md).
CONTAINER_FIELDS = ("image", "container_engine")
# Nor a backend's: the call file lives in this machine's cache directory, which a cluster's
# nodes need not see (docs/sdk.md); a command job goes anywhere (docs/backends.md).
BACKEND_FIELDS = ("backend", "nodes")


@dataclass(frozen=True)
class Job:
    """A job to submit: `command` is a list of words or one string (split as a shell
    would, without running one). Raises `gpupool.spec.SpecError` (a ValueError) naming
    every bad field, e.g. "gpus: must be at least 0, got -1". `time=None`: the pool's
    default time limit; `project=None`: your default project."""

    command: str | Sequence[str]
    gpus: int | float = DEFAULT_GPUS
    gpu_type: str | None = None
    gpu_memory: str | int | None = None
    cpus: int | None = None
    mem: str | int | None = None
    time: str | float | None = DEFAULT_TIME
    begin: str | float | None = None
    name: str | None = None
    project: str | None = None
    priority: str | int | None = None
    preemptible: bool | None = None
    env: Mapping[str, str] | None = None
    workdir: str | None = None
    grace: str | float | None = None
    # A signal before its time limit, as `gpupool submit --signal`: "USR1@120", "TERM@2m",
    # "none" (default: USR1@120 once it has written to its GPUPOOL_CHECKPOINT_DIR).
    signal: str | None = None
    # An array of tasks, one job per index, as `gpupool submit --array` takes it ("0-99%8");
    # not a JobOptions key: Client.map makes one from its items.
    array: str | None = None
    # Run in a container of this image, only the job's GPUs visible (docs/containers.md);
    # the engine: podman, docker or apptainer (default: the first the pool has).
    image: str | None = None
    container_engine: str | None = None
    # Run on a backend of the pool (`[backends.NAME]` of its gpupool.toml: Slurm, Ray,
    # Kubernetes) instead of its own machine, over `nodes` nodes (`gpus` per node).
    backend: str | None = None
    nodes: int | None = None
    # What the spec parser made of the fields (read-only; what `to_wire` sends).
    spec: JobSpec = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from gpupool.spec import build_spec

        given = {k: v for k, v in self._fields().items() if v is not None}
        if isinstance(self.command, (list, tuple)):
            given["command"] = list(self.command)  # a tuple reads as a list of words
        given = absolute_workdir(given)
        spec = build_spec(
            given,
            base_env=submitter_environment(),
            default_workdir=os.getcwd(),
            umask=current_umask(),
        )
        object.__setattr__(self, "spec", spec)

    def _fields(self) -> dict[str, Any]:
        """The user's fields by their spec keys (gpupool.spec.SPEC_KEYS)."""
        names = (*JobOptions.__annotations__, *CONTAINER_FIELDS, *BACKEND_FIELDS)
        values = {name: getattr(self, name) for name in names}
        values["command"] = self.command
        values["array"] = self.array
        if self.env is not None:
            values["env"] = dict(self.env)
        return values

    def to_wire(self) -> JsonObject:
        """The spec as the API takes it (gpupool.spec.spec_to_wire), as `gpupool submit`
        sends it: no project given leaves the choice to the daemon (your default)."""
        from gpupool.spec import spec_to_wire

        wire = spec_to_wire(self.spec)
        if self.project is None:
            wire["project"] = None
        return wire
