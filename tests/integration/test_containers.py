"""`--image`: a job runs in a real container through the real daemon (docs/containers.md).

The image is made here (container_image.py): busybox and an /etc/os-release naming it, so
a line of that file in the job's log proves the command ran inside. The job sees its own
--env, the pool's variables (GPUPOOL_*, CUDA_VISIBLE_DEVICES: declared GPUs, so as on the
host) and its checkpoint directory, and not the submitter's shell environment; its working
directory and checkpoint directory are the host's (bind-mounted); its exit code is the
job's. Cancel stops the container, also one that ignores SIGTERM (the grace's SIGKILL), and
leaves none behind. In shared mode the command is its owner inside, and what it writes is
theirs. Refusals at submit name the field.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpupool.executor.container import container_name
from integration.container_image import IMAGE, IMAGE_ID, Podman, podman_that_runs
from integration.pool_harness import Pool, submit_spec, wait_for
from integration.real_users import as_user, ensure_user, owned_dir, public_dir, require_root

pytestmark = pytest.mark.backend_independent  # what runs where: the database has no say


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Podman:
    return podman_that_runs(tmp_path_factory.mktemp("image"))


class ContainerPool(Pool):
    """A pool whose daemon has podman's settings (CONTAINERS_CONF where this machine needs
    one) and, with `path`, only that PATH to find engines on."""

    def __init__(self, root: Path, podman: Podman | None, path: str | None = None) -> None:
        super().__init__(root)
        self.podman = podman
        self.path = path

    def daemon_env(self) -> dict[str, str]:
        env = {**self.env, **(self.podman.env() if self.podman else {})}
        if self.path is not None:
            env["PATH"] = self.path
        return env


@pytest.fixture
def pool(tmp_path: Path, podman: Podman) -> Iterator[ContainerPool]:
    p = ContainerPool(tmp_path / "pool", podman)
    p.start()
    try:
        yield p
    finally:
        p.cleanup()


def prefix(pool: Pool, job_id: int) -> str:
    """The start of every container name of the job's runs (its attempts)."""
    return container_name(pool.state_dir, job_id, 0).removesuffix("-0") + "-"


INSIDE = (
    "cat /etc/os-release; echo FOO=$FOO; echo SHELL_VAR=$SUBMITTER_ONLY; "
    "echo CVD=$CUDA_VISIBLE_DEVICES; echo JOB=$GPUPOOL_JOB_ID; echo CKPT=$GPUPOOL_CHECKPOINT_DIR; "
    "echo PWD=$(pwd); echo written > out.txt; touch $GPUPOOL_CHECKPOINT_DIR/mark; exit 7"
)


def test_a_job_runs_in_its_image_with_its_gpus_env_and_directories(
    pool: ContainerPool, podman: Podman, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("SUBMITTER_ONLY", "from-the-shell")  # captured by submit (base env)
    args = ["--gpus", "2", "--image", IMAGE, "--env", "FOO=bar", "--", "/bin/sh", "-c", INSIDE]
    job_id = pool.cli_submit(*args, cwd=work)
    job = pool.wait(job_id)
    log = pool.log(job_id)
    assert f"ID={IMAGE_ID}" in log.splitlines(), log  # the image's file, not the host's
    assert (job.state, job.exit_code) == ("FAILED", 7), log
    assert "FOO=bar" in log
    assert "SHELL_VAR=\n" in log  # the submitter's shell environment stays outside
    assert f"CVD={','.join(map(str, job.gpus))}" in log  # declared GPUs: as on the host
    assert len(job.gpus) == 2
    assert f"JOB={job_id}" in log
    checkpoints = pool.state_dir / "checkpoints" / str(job_id)
    assert f"CKPT={checkpoints}" in log
    assert f"PWD={work}" in log
    assert (work / "out.txt").read_text() == "written\n"  # the host's directory, mounted
    assert (checkpoints / "mark").exists()
    assert (job.image, job.container_engine) == (IMAGE, "podman")
    shown = pool.cli("show", str(job_id), check=True).stdout
    assert f"Container       {IMAGE} (podman)" in shown
    assert podman.containers(prefix(pool, job_id)) == []  # --rm


@pytest.mark.parametrize(
    ("command", "exit_code"),
    [
        pytest.param("sleep 1000", 143, id="stops on SIGTERM"),
        pytest.param("trap 'echo got TERM' TERM; while true; do sleep 1; done", 137, id="killed"),
    ],
)
def test_cancel_stops_the_container_and_leaves_none_behind(
    pool: ContainerPool, podman: Podman, tmp_path: Path, command: str, exit_code: int
) -> None:
    args = ["--gpus", "1", "--grace", "1s", "--image", IMAGE, "--", "/bin/sh", "-c", command]
    job_id = pool.cli_submit(*args, cwd=tmp_path)
    name = container_name(pool.state_dir, job_id, 0)
    wait_for(lambda: podman.containers(name) == [name], 60, "the container to run")
    pool.cancel(job_id)
    job = pool.wait(job_id)
    assert (job.state, job.exit_code) == ("CANCELLED", exit_code), pool.log(job_id)
    assert podman.containers(prefix(pool, job_id)) == []


def test_a_job_in_shared_mode_is_its_owner_inside(podman: Podman) -> None:
    require_root()
    alice = ensure_user("gpupool-alice")
    with public_dir("gpupool-containers-") as root:
        pool = ContainerPool(root / "pool", podman)
        pool.root.mkdir()
        pool.root.chmod(0o711)
        pool.start()
        try:
            work = owned_dir(root / "work", alice)
            wire = submit_spec(
                ["--image", IMAGE, "--", "/bin/sh", "-c", "id -u; id -g; touch made"],
                pool.env,
                work,
            )
            answer = as_user(alice.pw_name, lambda: str(pool.client.submit(wire, "t-1").id))
            assert answer.code == 0, answer.err
            job_id = int(str(answer.value))
            job = pool.wait(job_id)
            assert job.state == "SUCCEEDED", pool.log(job_id)
            uid, gid = pool.log(job_id).splitlines()[:2]
            assert (int(uid), int(gid)) == (alice.pw_uid, alice.pw_gid)
            made = (work / "made").stat()
            assert (made.st_uid, made.st_gid) == (alice.pw_uid, alice.pw_gid)
        finally:
            pool.cleanup()


def test_an_engine_that_is_not_installed_is_refused_naming_the_field(
    tmp_path: Path,
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "docker"  # never run: a refusal happens before anything starts
    fake.write_text("#!/bin/sh\nexit 99\n")
    fake.chmod(0o755)
    pool = ContainerPool(tmp_path / "pool", None, path=str(bin_dir))
    pool.start()
    try:
        named = pool.cli("submit", "--image", IMAGE, "--container-engine", "podman", "--", "true")
        assert named.returncode == 2, named.stderr
        assert (
            "container_engine: podman is not installed on the pool's machine (installed: docker)"
        ) in named.stderr
        fake.unlink()
        none = pool.cli("submit", "--image", IMAGE, "--", "true")
        assert none.returncode == 2, none.stderr
        assert "image: no container engine (podman, docker, apptainer) is installed" in none.stderr
        torchrun = ["--gpus", "2", "--distributed", "torchrun", "--image", IMAGE, "--", "true"]
        refused = pool.cli("submit", *torchrun)
        assert refused.returncode == 2
        assert "image: cannot be combined with distributed: torchrun" in refused.stderr
        assert pool.client.jobs(include_finished=True) == ()
    finally:
        pool.cleanup()


def test_a_lost_supervisors_container_is_removed(
    pool: ContainerPool, podman: Podman, tmp_path: Path
) -> None:
    """The supervisor SIGKILLed (the OOM killer): the container is no process of the job's
    session, so the daemon removes it by name before the GPUs go to anyone else."""
    job_id = pool.cli_submit("--gpus", "1", "--image", IMAGE, "--", "sleep", "1000", cwd=tmp_path)
    name = container_name(pool.state_dir, job_id, 0)
    wait_for(lambda: podman.containers(name) == [name], 60, "the container to run")
    claim = pool.state_dir / "jobs" / str(job_id) / "claim.json"
    os.kill(json.loads(claim.read_text())["supervisor_pid"], signal.SIGKILL)
    job = pool.wait(job_id)
    assert job.state == "FAILED"
    assert podman.containers(prefix(pool, job_id)) == []
