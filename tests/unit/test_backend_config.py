"""Backends in gpupool.toml (spec/pool_config.py), where a submission runs
(service/backend_choice.py) and the `gpupool backends` table (cli/backends.py)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from gpupool.cli.backends import backends_table
from gpupool.client.pool_views import read_backends
from gpupool.client.wire_json import JsonObject
from gpupool.core.backends import Admission, Backend, BackendHealth, BackendKind, Capacity
from gpupool.core.containers import ContainerEngine
from gpupool.core.execution import (
    Capabilities,
    Handle,
    LaunchRequest,
    Leftovers,
    LogChunk,
    Observation,
    StopKind,
)
from gpupool.core.job import JobSpec, Resources
from gpupool.service.backend_choice import Refusal, settle_backend
from gpupool.spec.pool_config import BackendTable, ConfigError, parse_config


def test_backend_tables_and_a_projects_default() -> None:
    config = parse_config(
        '[backends.hpc]\nkind = "slurm"\npartition = "gpu"\n'
        '[projects.vision]\nquota = 2\nbackend = "hpc"\n'
        '[projects.nlp]\nbackend = "local"\n'
    )
    assert config.backends == (BackendTable("hpc", BackendKind.SLURM, {"partition": "gpu"}),)
    assert config.project_backends == (("vision", "hpc"), ("nlp", "local"))


def test_admission_and_quotas_are_the_pools_not_the_backends_settings() -> None:
    config = parse_config(
        '[backends.hpc]\nkind = "slurm"\npartition = "gpu"\n[backends.hpc.quotas]\nvision = 16\n'
        '[backends.ray1]\nkind = "ray"\nadmission = "engine"\ncheckpoint_dir = "/shared/ckpt"\n'
    )
    hpc, ray1 = config.backends
    assert hpc.settings == {"partition": "gpu"}  # what the backend checks: not the pool's keys
    assert ray1.settings == {} and ray1.admission.checkpoint_dir == "/shared/ckpt"
    assert (hpc.admission.mode, dict(hpc.admission.quotas)) == (Admission.POOL, {"vision": 16.0})
    assert (ray1.admission.mode, dict(ray1.admission.quotas)) == (Admission.ENGINE, {})


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            '[backends.hpc]\nkind = "lsf"\n',
            "backends.hpc.kind: must be one of slurm, ray, kubernetes",
        ),
        ("[backends.hpc]\n", "backends.hpc.kind: must be one of slurm, ray, kubernetes, got None"),
        ('[backends.local]\nkind = "ray"\n', "backends.local: a backend's name is"),
        ('[backends.Big]\nkind = "ray"\n', "backends.Big: a backend's name is"),
        ('[backends.any]\nkind = "ray"\n', "backends.any: a backend's name is"),
        (
            '[backends.hpc]\nkind = "ray"\nadmission = "kueue"\n',
            "backends.hpc.admission: must be one of pool, engine, got 'kueue'",
        ),
        (
            '[backends.hpc]\nkind = "ray"\n[backends.hpc.quotas]\nvision = -1\n',
            "backends.hpc.quotas.vision: must be a number of GPUs >= 0, got -1",
        ),
        (
            '[backends.hpc]\nkind = "ray"\ncheckpoint_dir = "ckpt"\n',
            "backends.hpc.checkpoint_dir: must be an absolute path both the pool and the "
            "engine's nodes reach, got 'ckpt'",
        ),
        (
            '[backends.hpc]\nkind = "ray"\nquotas = 4\n',
            "backends.hpc.quotas: must be a table of project = GPUs, got 4",
        ),
        (
            '[backends.hpc]\nkind = "ray"\nadmission = "engine"\n[backends.hpc.quotas]\na = 1\n',
            'backends.hpc.quotas: quotas need admission = "pool"',
        ),
        (
            '[projects.vision]\nbackend = "hpc"\n',
            "projects.vision.backend: must be local, any or a [backends.NAME] table's name "
            "(configured: none), got 'hpc'",
        ),
    ],
)
def test_bad_backend_config_names_the_key(text: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert any(p.startswith(problem) for p in caught.value.problems), caught.value.problems


class _Backend:
    """Only what settle_backend reads: the declared capabilities (a Backend otherwise)."""

    def __init__(self, caps: Capabilities) -> None:
        self._caps = caps

    name = "hpc"
    kind = BackendKind.SLURM

    @property
    def capabilities(self) -> Capabilities:
        return self._caps

    def health(self) -> BackendHealth:
        return BackendHealth(True, "")

    def capacity(self) -> Capacity:
        return Capacity()

    def container_engines(self) -> Sequence[ContainerEngine]:
        return ()

    def launch(self, request: LaunchRequest) -> None: ...

    def poll(self, handles: Collection[Handle]) -> dict[Handle, Observation]:
        return {}

    def adopt(self, handles: Collection[Handle]) -> dict[Handle, Observation]:
        return {}

    def signal(self, handle: Handle, kind: StopKind) -> bool:
        return False

    def set_time_limit(self, handle: Handle, seconds: float) -> bool:
        return False

    def send_signal(self, handle: Handle, signum: int) -> bool:
        return False

    def release(self, handle: Handle) -> bool:
        return True

    def settle_lost(self, handle: Handle, wait_s: float) -> Leftovers:
        return Leftovers(None)

    def logs(
        self, handle: Handle, offset: int, limit: int, rank: int | None = None, stderr: bool = False
    ) -> LogChunk:
        return LogChunk(b"", offset)

    def log_location(self, job_id: int) -> str:
        return ""

    @property
    def data_dir(self) -> Path | None:
        return None

    def close(self) -> None: ...


GANG: dict[str, Backend] = {"hpc": _Backend(Capabilities(multi_node=True))}
SHARES: dict[str, Backend] = {"ray": _Backend(Capabilities(multi_node=True, fractional_gpus=True))}
SPEC = JobSpec(("train",), Resources(gpus=4))


@pytest.mark.parametrize(
    ("spec", "default", "backends", "expected"),
    [
        (SPEC, None, GANG, SPEC),
        (SPEC, "hpc", GANG, replace(SPEC, backend="hpc")),  # the project's default
        (replace(SPEC, backend="local"), "hpc", GANG, SPEC),  # local wins, stored as None
        (replace(SPEC, backend="hpc", nodes=8), None, GANG, replace(SPEC, backend="hpc", nodes=8)),
        (
            replace(SPEC, nodes=2),
            None,
            GANG,
            "nodes: the local pool is one machine; use --backend NAME to run on 2 nodes "
            "(backends: hpc)",
        ),
        (
            replace(SPEC, backend="ray"),
            None,
            GANG,
            "backend: no backend named ray in this pool (configured: hpc;",
        ),
        (
            replace(SPEC, backend="hpc", nodes=2),
            None,
            {"hpc": _Backend(Capabilities())},
            "nodes: backend hpc runs a job on one node, not 2",
        ),
        (
            replace(SPEC, backend="hpc", image="busybox"),
            None,
            GANG,
            "image: backend hpc runs no container images",
        ),
        (
            replace(SPEC, backend="hpc", resources=Resources(gpus=1, gpu_fraction=0.5)),
            None,
            GANG,
            "gpus: backend hpc gives whole GPUs",
        ),
        (
            replace(SPEC, backend="hpc", resources=Resources(gpus=1, gpu_memory_bytes=20 << 30)),
            None,
            GANG,
            "gpu_memory: backend hpc gives whole GPUs",
        ),
        (  # a backend that shares GPUs by fraction (Ray) takes a fraction...
            replace(SPEC, backend="ray", resources=Resources(gpus=1, gpu_fraction=0.5)),
            None,
            SHARES,
            replace(SPEC, backend="ray", resources=Resources(gpus=1, gpu_fraction=0.5)),
        ),
        (  # ...but no amount of GPU memory
            replace(SPEC, backend="ray", resources=Resources(gpus=1, gpu_memory_bytes=20 << 30)),
            None,
            SHARES,
            "gpu_memory: backend ray shares a GPU by fraction only: use --gpus 0.5",
        ),
        # --backend any: the pool's machine, routable to every backend that can run it...
        (replace(SPEC, backend="any"), None, GANG, replace(SPEC, route_to=("hpc",))),
        (SPEC, "any", {**GANG, **SHARES}, replace(SPEC, route_to=("hpc", "ray"))),
        # ...a gang: the first backend that runs gangs, routable to none of the others...
        (replace(SPEC, backend="any", nodes=2), None, GANG, replace(SPEC, backend="hpc", nodes=2)),
        # ...a share of one GPU: where GPUs are shared (the box, Ray), not Slurm's whole GPUs.
        (
            replace(SPEC, backend="any", resources=Resources(gpus=1, gpu_fraction=0.5)),
            None,
            {**GANG, **SHARES},
            replace(SPEC, resources=Resources(gpus=1, gpu_fraction=0.5), route_to=("ray",)),
        ),
        (
            replace(SPEC, backend="any", nodes=2),
            None,
            {"hpc": _Backend(Capabilities())},
            "backend: no place can run it: nodes: the local pool is one machine",
        ),
    ],
)
def test_where_a_submission_runs(
    spec: JobSpec, default: str | None, backends: dict[str, Backend], expected: JobSpec | str
) -> None:
    got = settle_backend(spec, default, backends)
    if isinstance(expected, str):
        assert isinstance(got, Refusal) and got.message.startswith(expected), got
    else:
        assert got == expected


def test_the_backends_table() -> None:
    view = read_backends(
        {
            "backends": [
                {
                    "name": "local",
                    "kind": "local",
                    "reachable": True,
                    "capabilities": ["containers"],
                    "jobs": 3,
                    "summary": "1 node(s), 4 GPUs (declared)",
                },
                {
                    "name": "hpc",
                    "kind": "slurm",
                    "reachable": False,
                    "capabilities": ["multi_node", "preemption_signal"],
                    "jobs": 0,
                    "summary": "slurmctld does not answer",
                },
            ]
        }
    )
    header, rows = backends_table(view)
    assert header == ("NAME", "KIND", "REACHABLE", "CAPABILITIES", "JOBS", "SUMMARY")
    assert rows == [
        ("local", "local", "yes", "containers", 3, "1 node(s), 4 GPUs (declared)"),
        ("hpc", "slurm", "NO", "multi_node,preemption_signal", 0, "slurmctld does not answer"),
    ]


def test_a_multi_line_summary_is_one_line_of_the_table() -> None:
    """An engine's error of several lines (sinfo's, when slurmctld is down) is shown whole,
    its lines joined, never as escaped newlines."""
    row: JsonObject = {
        "name": "hpc",
        "kind": "slurm",
        "reachable": False,
        "capabilities": [],
        "jobs": 0,
        "summary": "sinfo: error: cannot stat file\n\nsinfo: fatal: Unable to process\n",
    }
    _, rows = backends_table(read_backends({"backends": [row]}))
    assert rows[0][-1] == "sinfo: error: cannot stat file; sinfo: fatal: Unable to process"


def test_a_project_with_a_quota_on_a_backend_goes_anywhere_by_default() -> None:
    from gpupool.spec.pool_config import where_projects_go

    config = parse_config(
        '[backends.hpc]\nkind = "slurm"\n[backends.hpc.quotas]\nvision = 8\nnlp = 0\n'
        '[backends.ray1]\nkind = "ray"\nadmission = "engine"\n'
        '[projects.vision]\nquota = 2\n[projects.speech]\nbackend = "ray1"\n'
        "[projects.nlp]\nquota = 1\n"
    )
    # vision: a quota on hpc, no backend of its own; speech: its own; nlp: no GPUs on hpc.
    assert where_projects_go(config) == {"vision": "any", "speech": "ray1"}
