"""Containers (`--image`; docs/containers.md): the engine chosen at submit, the spec's
rules, and each engine's command line, with GPUs as devices, declared GPUs and none."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest

from gpupool.core.containers import ContainerEngine, EngineRefused, choose_engine
from gpupool.executor.container import (
    ContainerRun,
    UserIds,
    apptainer_environment,
    cleanup_command,
    container_environment,
    container_name,
    engine_environment,
    env_file_lines,
    installed_engines,
    run_command,
    write_env_file,
)
from gpupool.spec import SpecError, build_spec, spec_from_wire, spec_to_wire
from gpupool.store.codec import decode_spec, encode_spec

PODMAN, DOCKER, APPTAINER = (
    ContainerEngine.PODMAN,
    ContainerEngine.DOCKER,
    ContainerEngine.APPTAINER,
)


@pytest.mark.parametrize(
    ("requested", "installed", "expected"),
    [
        pytest.param(None, [DOCKER, PODMAN, APPTAINER], PODMAN, id="podman first"),
        pytest.param(None, [APPTAINER, DOCKER], DOCKER, id="docker before apptainer"),
        pytest.param(None, [APPTAINER], APPTAINER, id="apptainer alone"),
        pytest.param(DOCKER, [PODMAN, DOCKER], DOCKER, id="the named one"),
        pytest.param(
            APPTAINER,
            [PODMAN],
            EngineRefused(
                "container_engine",
                "apptainer is not installed on the pool's machine (installed: podman)",
            ),
            id="named, not installed",
        ),
        pytest.param(
            None,
            [],
            EngineRefused(
                "image",
                "no container engine (podman, docker, apptainer) is installed on the "
                "pool's machine",
            ),
            id="none installed",
        ),
    ],
)
def test_the_engine_is_the_named_one_or_the_first_installed(
    requested: ContainerEngine | None,
    installed: list[ContainerEngine],
    expected: ContainerEngine | EngineRefused,
) -> None:
    assert choose_engine(requested, installed) == expected


def test_installed_engines_are_found_on_the_path_in_preference_order(tmp_path: Path) -> None:
    for name in ("apptainer", "podman"):
        exe = tmp_path / name
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    (tmp_path / "docker").write_text("not executable")
    found = installed_engines(str(tmp_path))
    assert list(found) == [PODMAN, APPTAINER]
    assert found[PODMAN] == str(tmp_path / "podman")
    assert installed_engines(str(tmp_path / "empty")) == {}


# -- the spec ------------------------------------------------------------------------------


def test_image_and_engine_travel_through_the_wire_and_the_store() -> None:
    spec = build_spec({"command": "nvidia-smi", "image": "nvcr.io/nvidia/pytorch:24.05-py3"})
    assert (spec.image, spec.container_engine) == ("nvcr.io/nvidia/pytorch:24.05-py3", None)
    named = build_spec(
        {"command": "x", "image": "docker://ubuntu:24.04", "container_engine": "Apptainer"}
    )
    assert named.container_engine is APPTAINER
    for s in (spec, named):
        assert spec_from_wire(spec_to_wire(s)) == s
        assert decode_spec(encode_spec(s)) == s
    plain = build_spec({"command": "x"})
    assert "image" not in spec_to_wire(plain)  # a daemon without containers takes it
    assert "image" not in encode_spec(plain)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param(
            {"image": "--privileged"}, "image: must be an image reference", id="an option"
        ),
        pytest.param({"image": "a b"}, "image: must be an image reference", id="a space"),
        pytest.param({"image": ""}, "image: must be an image reference", id="empty"),
        pytest.param(
            {"image": "x", "container_engine": "lxc"},
            "container_engine: must be one of podman, docker, apptainer, got 'lxc'",
            id="unknown engine",
        ),
        pytest.param(
            {"container_engine": "podman"},
            "container_engine: needs an image to run",
            id="engine without image",
        ),
        pytest.param(
            {"image": "x", "distributed": "torchrun", "gpus": 2},
            "image: cannot be combined with distributed: torchrun; run torchrun --standalone",
            id="with torchrun",
        ),
    ],
)
def test_bad_container_fields_are_refused_by_name(fields: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError) as e:
        build_spec({"command": "x", **fields})
    assert message in str(e.value)
    wire = {"command": ["x"], **fields}
    with pytest.raises(SpecError) as w:  # the daemon's parser says the same
        spec_from_wire(wire)
    assert message in str(w.value)


# -- command lines -------------------------------------------------------------------------


BASE = ContainerRun(
    engine=PODMAN,
    executable="/usr/bin/podman",
    name="gpupool-abc-12-0",
    image="localhost/train:1",
    command=("python", "train.py", "--lr", "3e-4"),
    gpus=(2, 3),
    gpu_devices=True,
    workdir="/home/alice/run",
    binds=("/home/alice/run", "/var/lib/gpupool/checkpoints/12"),
    env_file="/var/lib/gpupool/jobs/12/container.env",
    user=UserIds(1001, 1001, (1001, 27)),
)


def _run(engine: ContainerEngine, **changes: Any) -> ContainerRun:
    return dataclasses.replace(
        BASE, engine=engine, executable=f"/usr/bin/{engine.value}", **changes
    )


COMMON = [
    "run", "--rm", "--name", "gpupool-abc-12-0", "--init", "--network=host", "--ipc=host",
    "--cap-drop=all", "--security-opt=no-new-privileges",
]  # fmt: skip
MOUNTS = [
    "--env-file", "/var/lib/gpupool/jobs/12/container.env",
    "-v", "/home/alice/run:/home/alice/run",
    "-v", "/var/lib/gpupool/checkpoints/12:/var/lib/gpupool/checkpoints/12",
    "--workdir", "/home/alice/run",
]  # fmt: skip
TAIL = ["--", "localhost/train:1", "python", "train.py", "--lr", "3e-4"]


def test_podman_gets_one_cdi_device_per_gpu_and_runs_as_the_owner() -> None:
    assert run_command(_run(PODMAN)) == [
        "/usr/bin/podman", *COMMON, "--user", "1001:1001", "--group-add", "27", *MOUNTS,
        "--device", "nvidia.com/gpu=2", "--device", "nvidia.com/gpu=3", *TAIL,
    ]  # fmt: skip


def test_rootless_podman_keeps_the_users_id() -> None:
    argv = run_command(_run(PODMAN, user=None))
    assert "--userns=keep-id" in argv
    assert "--user" not in argv


def test_docker_gets_its_gpus_as_one_quoted_csv_field() -> None:
    assert run_command(_run(DOCKER)) == [
        "/usr/bin/docker", *COMMON, "--user", "1001:1001", "--group-add", "27", *MOUNTS,
        "--gpus", '"device=2,3"', *TAIL,
    ]  # fmt: skip


@pytest.mark.parametrize("engine", [PODMAN, DOCKER])
@pytest.mark.parametrize(
    ("gpus", "devices"),
    [pytest.param((), True, id="no GPUs"), pytest.param((0, 1), False, id="declared GPUs")],
)
def test_no_device_is_passed_without_gpus_or_for_declared_ones(
    engine: ContainerEngine, gpus: tuple[int, ...], devices: bool
) -> None:
    argv = run_command(_run(engine, gpus=gpus, gpu_devices=devices))
    assert not any(a.startswith(("--device", "--gpus")) for a in argv)
    assert argv[-5:] == TAIL[1:]


def test_apptainer_exec_with_nv_binds_and_no_name() -> None:
    assert run_command(_run(APPTAINER)) == [
        "/usr/bin/apptainer", "exec", "--cleanenv", "--nv",
        "--bind", "/home/alice/run:/home/alice/run",
        "--bind", "/var/lib/gpupool/checkpoints/12:/var/lib/gpupool/checkpoints/12",
        "--pwd", "/home/alice/run", "localhost/train:1", "python", "train.py", "--lr", "3e-4",
    ]  # fmt: skip
    assert "--nv" not in run_command(_run(APPTAINER, gpu_devices=False))
    assert "--nv" not in run_command(_run(APPTAINER, gpus=()))


def test_cleanup_removes_the_named_container_whatever_its_state() -> None:
    name = "gpupool-abc-12-0"
    assert cleanup_command(_run(PODMAN)) == [
        "/usr/bin/podman", "rm", "--force", "--ignore", "--time", "0", name,
    ]  # fmt: skip
    assert cleanup_command(_run(DOCKER)) == ["/usr/bin/docker", "rm", "--force", name]
    assert cleanup_command(_run(APPTAINER)) is None  # its processes are the job's own


def test_names_tell_pools_and_attempts_apart() -> None:
    a, b = Path("/var/lib/gpupool"), Path("/home/bob/.local/state/gpupool")
    assert container_name(a, 12, 0) == container_name(a, 12, 0)
    assert len({container_name(a, 12, 0), container_name(b, 12, 0), container_name(a, 12, 1)}) == 3
    assert container_name(a, 12, 1).startswith("gpupool-") and container_name(a, 12, 1).endswith(
        "-12-1"
    )


# -- what the command sees, and what the engine program sees -------------------------------

POOL_ENV = {"CUDA_VISIBLE_DEVICES": "2,3", "NVIDIA_VISIBLE_DEVICES": "2,3", "GPUPOOL_GPUS": "2,3"}


@pytest.mark.parametrize(
    ("engine", "devices", "inside"),
    [
        pytest.param(PODMAN, True, "0,1", id="podman: only its GPUs, from 0"),
        pytest.param(DOCKER, True, "0,1", id="docker: only its GPUs, from 0"),
        pytest.param(APPTAINER, True, "2,3", id="apptainer --nv: every GPU, the host's"),
        pytest.param(PODMAN, False, "2,3", id="declared: as on the host"),
    ],
)
def test_cuda_visible_devices_names_the_gpus_as_the_container_numbers_them(
    engine: ContainerEngine, devices: bool, inside: str
) -> None:
    env = container_environment(POOL_ENV, engine, (2, 3), devices)
    assert env["CUDA_VISIBLE_DEVICES"] == inside
    assert env["NVIDIA_VISIBLE_DEVICES"] == "2,3"  # the runtime's, on the host side
    assert env["GPUPOOL_GPUS"] == "2,3"


def test_the_engine_program_never_takes_the_jobs_variables() -> None:
    daemon = {
        "PATH": "/usr/bin",
        "XDG_RUNTIME_DIR": "/run/user/1000",
        "CONTAINERS_CONF": "/etc/gpupool/containers.conf",
        "DOCKER_HOST": "unix:///run/docker.sock",
        "LD_PRELOAD": "/tmp/evil.so",
        "APPTAINERENV_X": "y",
        "GPUPOOL_TOKEN": "secret",
    }
    assert engine_environment(daemon) == {
        "PATH": "/usr/bin",
        "XDG_RUNTIME_DIR": "/run/user/1000",
        "CONTAINERS_CONF": "/etc/gpupool/containers.conf",
        "DOCKER_HOST": "unix:///run/docker.sock",
    }
    assert apptainer_environment({"FOO": "a b"}) == {"APPTAINERENV_FOO": "a b"}


def test_the_env_file_holds_values_verbatim_and_leaves_out_multiline_ones(tmp_path: Path) -> None:
    env = {"B": "x=y  # not a comment", "A": "", "FN": "() { echo\n}", "C": " lead"}
    text, left_out = env_file_lines(env)
    assert text == "A=\nB=x=y  # not a comment\nC= lead\n"
    assert left_out == ["FN"]
    path = tmp_path / "container.env"
    assert write_env_file(path, env) == ["FN"]
    assert path.read_text() == text
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["container.env"]  # no temporary left
