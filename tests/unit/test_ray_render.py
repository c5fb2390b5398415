"""The Ray backend's settings and rendering, pure (no Ray contacted: the real-Ray tests
are tests/integration/test_ray_backend.py)."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace

import pytest

from gpupool.backends.ray.gang import GANG_ENV, rank_env
from gpupool.backends.ray.render import GANG_SOURCE, META_TIME_LIMIT, render
from gpupool.backends.ray.settings import RaySettings, WorkdirPolicy, parse_settings
from gpupool.core.backends import BackendConfigError
from gpupool.core.execution import (
    Allocation,
    BackendRequest,
    Handle,
    LaunchRequest,
    RankLayout,
)

ADDRESS = "http://10.0.0.1:8265"


def settings(**more: object) -> RaySettings:
    return parse_settings({"kind": "ray", "address": ADDRESS, **more})


def launch(
    gpus: int = 2,
    nodes: int = 1,
    ranks: RankLayout | None = None,
    time_limit_s: float | None = None,
    command: tuple[str, ...] = ("python", "train.py", "--lr", "1e-3; rm -rf /"),
) -> LaunchRequest:
    return LaunchRequest(
        handle=Handle(42, 1),
        command=command,
        env={"PATH": "/usr/bin", "HOME": "/home/ann"},
        workdir="/home/ann/my project",
        time_limit_s=time_limit_s,
        grace_s=30.0,
        allocation=Allocation("ray", ()),
        ranks=ranks,
        backend=BackendRequest(
            name="train",
            project="vision",
            gpus_per_node=gpus,
            nodes=nodes,
            cpus_per_node=4,
            mem_bytes_per_node=8 << 30,
            job_env={"GPUPOOL_JOB_ID": "42", "LR": "1e-3"},
        ),
    )


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({}, "address"),
        ({"address": "10.0.0.1:8265"}, "address"),
        ({"address": "http://10.0.0.1"}, "address"),
        ({"address": "http://10.0.0.1:8265/jobs"}, "address"),
        ({"address": ADDRESS, "kind": "slurm"}, "kind"),
        ({"address": ADDRESS, "adress": "x"}, "adress"),
        ({"address": ADDRESS, "request_timeout_s": 0}, "request_timeout_s"),
        ({"address": ADDRESS, "request_timeout_s": True}, "request_timeout_s"),
        ({"address": ADDRESS, "request_timeout_s": float("nan")}, "request_timeout_s"),
        ({"address": ADDRESS, "workdir": "upload"}, "workdir"),
        ({"address": ADDRESS, "driver_python": "python3 -I"}, "driver_python"),
        ({"address": ADDRESS, "env_vars": {"1BAD": "x"}}, "env_vars"),
        ({"address": ADDRESS, "env_vars": {"GOOD": 3}}, "env_vars.GOOD"),
        ({"address": ADDRESS, "env_vars": ["A=1"]}, "env_vars"),
    ],
    ids=lambda v: str(v)[:40],
)
def test_a_bad_setting_is_refused_naming_its_key(table: dict[str, object], key: str) -> None:
    with pytest.raises(BackendConfigError) as refused:
        parse_settings(table)
    assert refused.value.key == key


def test_settings_have_defaults_and_keep_only_the_address_s_origin() -> None:
    s = parse_settings({"address": "https://head.example:8265/"})
    assert s == RaySettings(address="https://head.example:8265")
    assert s.host_port == "head.example:8265"
    assert s.workdir is WorkdirPolicy.SHARED and s.request_timeout_s == 5.0


def test_one_process_is_the_quoted_command_with_entrypoint_resources() -> None:
    sub = render(launch(), settings(env_vars={"LR": "default", "NCCL_DEBUG": "WARN"}), "p1")
    assert sub.submission_id == "gp-p1-42-1"
    assert shlex.split(sub.entrypoint) == [
        "cd", "/home/ann/my project", "&&", "exec",
        "python", "train.py", "--lr", "1e-3; rm -rf /",
    ]  # fmt: skip
    assert (sub.entrypoint_num_gpus, sub.entrypoint_num_cpus) == (2.0, 4.0)
    assert sub.entrypoint_memory == 8 << 30
    # The job's own environment over the settings' (not the submitter's whole shell).
    # Ray's stop wait is the run's grace (30 s): a stop is SIGTERM, grace, SIGKILL.
    assert sub.runtime_env == {
        "env_vars": {
            "LR": "1e-3",
            "NCCL_DEBUG": "WARN",
            "GPUPOOL_JOB_ID": "42",
            "RAY_JOB_STOP_WAIT_TIME_S": "30",
        }
    }
    assert sub.metadata == {
        "gpupool_pool": "p1",
        "gpupool_job": "42",
        "gpupool_attempt": "1",
        "gpupool_project": "vision",
        "gpupool_name": "train",
        # The entrypoint's resources again, by Ray's names: Ray's job list omits them, and a
        # poll says from them why the run waits (test_ray_capacity.py).
        "gpupool_entrypoint_asks": json.dumps(
            {"CPU": 4.0, "GPU": 2.0, "memory": float(8 << 30)}, sort_keys=True
        ),
    }
    assert sub.gang is None


def test_a_time_limit_wraps_the_command_in_timeout_and_is_in_the_metadata() -> None:
    sub = render(launch(time_limit_s=3600), settings(workdir="cluster"), "p1")
    assert shlex.split(sub.entrypoint)[:5] == [
        "exec", "timeout", "--kill-after=30.000s", "3600.000s", "python",
    ]  # fmt: skip
    assert float(sub.metadata[META_TIME_LIMIT]) == 3600.0


def test_no_gpus_asks_for_none() -> None:
    sub = render(launch(gpus=0), settings(), "p1")
    assert sub.entrypoint_num_gpus is None


def _fraction(request: LaunchRequest, fraction: float) -> LaunchRequest:
    assert request.backend is not None
    return replace(request, backend=replace(request.backend, gpu_fraction=fraction))


def test_a_share_of_one_gpu_asks_ray_for_that_fraction() -> None:
    sub = render(_fraction(launch(gpus=1), 0.5), settings(), "p1")
    assert sub.entrypoint_num_gpus == 0.5
    assert json.loads(sub.metadata["gpupool_entrypoint_asks"])["GPU"] == 0.5


def test_a_share_of_one_gpu_is_never_a_gang() -> None:
    with pytest.raises(ValueError, match="not as a gang"):
        render(_fraction(launch(gpus=1, nodes=2), 0.5), settings(), "p1")


@pytest.mark.parametrize(
    ("nodes", "ranks", "strategy", "nproc"),
    [
        (2, RankLayout(nproc_per_node=2, nnodes=2), "STRICT_SPREAD", 2),
        (1, RankLayout(nproc_per_node=4, nnodes=1), "STRICT_PACK", 4),
        (3, None, "STRICT_SPREAD", 1),  # several nodes, not distributed: one per node
    ],
)
def test_a_gang_runs_the_driver_with_its_placement(
    nodes: int, ranks: RankLayout | None, strategy: str, nproc: int
) -> None:
    sub = render(launch(gpus=2, nodes=nodes, ranks=ranks, time_limit_s=60), settings(), "p1")
    assert shlex.split(sub.entrypoint) == ["python3", "-c", GANG_SOURCE]
    compile(GANG_SOURCE, "gang.py", "exec")  # what runs on the cluster is valid Python
    # The driver reserves nothing itself: its placement group does.
    assert (sub.entrypoint_num_gpus, sub.entrypoint_num_cpus, sub.entrypoint_memory) == (
        None,
        None,
        None,
    )
    spec = json.loads(sub.runtime_env["env_vars"][GANG_ENV])
    assert spec == sub.gang
    assert spec["strategy"] == strategy and spec["nodes"] == nodes
    assert spec["nproc_per_node"] == nproc and spec["gpus_per_node"] == 2
    assert spec["command"] == list(launch().command)
    assert spec["workdir"] == "/home/ann/my project"
    assert (spec["time_limit_s"], spec["grace_s"]) == (60, 30.0)
    # Ray waits for the driver to stop its ranks (their grace, then 5 s and a poll more).
    assert sub.runtime_env["env_vars"]["RAY_JOB_STOP_WAIT_TIME_S"] == "36"


def test_a_rank_gets_torchrun_s_environment() -> None:
    env = rank_env(
        {"A": "1"}, nproc=2, nnodes=3, node_rank=2, local=1, master="10.0.0.5", port=29500
    )
    assert env == {
        "A": "1",
        "MASTER_ADDR": "10.0.0.5",
        "MASTER_PORT": "29500",
        "WORLD_SIZE": "6",
        "RANK": "5",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "NODE_RANK": "2",
        "GROUP_RANK": "2",
        "OMP_NUM_THREADS": "1",
    }


def test_rendering_needs_the_backend_request() -> None:
    plain = launch()
    without = LaunchRequest(
        handle=plain.handle,
        command=plain.command,
        env=plain.env,
        workdir=plain.workdir,
        time_limit_s=None,
        grace_s=1,
        allocation=plain.allocation,
    )
    with pytest.raises(ValueError):
        render(without, settings(), "p1")
