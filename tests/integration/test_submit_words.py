"""Which words `gpupool submit` reads as a spec file and which as the command (the rule in
cli/submit.py, README and `submit --help`), and flag values that look like flags."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.pool_harness import Pool
from integration.shared_pool import (
    end_active_jobs,
    job_ids,
    module_pool_on_sqlite_fixture,  # noqa: F401
)

# how the CLI reads its words: the same on any database (the rule: integration/conftest.py)
pytestmark = pytest.mark.backend_independent


@pytest.fixture
def pool(module_pool_on_sqlite: Pool) -> Iterator[Pool]:
    """One daemon for the module (integration/shared_pool.py): each test looks only at the
    jobs it submits, and the pool is idle again after each."""
    yield module_pool_on_sqlite
    end_active_jobs(module_pool_on_sqlite)


SPEC = "name: from-file\ncommand: [sh, -c, 'echo $CUDA_VISIBLE_DEVICES']\ngpus: 1\n"


@pytest.mark.parametrize("name", ["job.yaml", "job.yml", "JOB.YAML", "jobspec"])
@pytest.mark.parametrize("where", ["after", "before", "both"])
def test_a_spec_file_takes_flags_before_or_after_it(
    pool: Pool, tmp_path: Path, name: str, where: str
) -> None:
    (tmp_path / name).write_text(SPEC)  # "jobspec": an existing file that is not executable
    args = {
        "after": [name, "--gpus", "2", "--name", "flags-win"],
        "before": ["--gpus", "2", "--name", "flags-win", name],
        "both": ["--gpus", "3", name, "--gpus", "2", "--name", "flags-win"],  # later wins
    }[where]
    job = pool.wait(pool.cli_submit(*args, cwd=tmp_path))
    assert job.command == ("sh", "-c", "echo $CUDA_VISIBLE_DEVICES")
    assert (job.name, len(job.gpus), job.state) == ("flags-win", 2, "SUCCEEDED")


def test_flags_after_a_spec_file_add_env_and_may_name_the_pool(pool: Pool, tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("command: [sh, -c, 'echo $A$B']\n")
    args = ["submit", "--env", "A=1", "job.yaml", "--env", "B=2", "--parsable"]
    args += ["--state-dir", str(pool.state_dir)]  # the pool is named after the file only
    proc = subprocess.run(
        [sys.executable, "-m", "gpupool", *args],
        env=dict(pool.env, GPUPOOL_STATE_DIR=str(tmp_path / "elsewhere")),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    job_id = int(proc.stdout)
    pool.wait(job_id)
    assert pool.cli("logs", str(job_id)).stdout.strip() == "12"


def test_a_command_after_double_dash_replaces_the_files(pool: Pool, tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(SPEC)
    job = pool.wait(pool.cli_submit("job.yaml", "--gpus", "1", "--", "echo", "mine", cwd=tmp_path))
    assert job.command == ("echo", "mine") and job.name == "from-file"


@pytest.mark.parametrize(
    "args",
    [
        ["nonexistent.yaml"],
        ["job.yml", "--gpus", "1"],
        ["--gpus", "1", "typo.YML"],
    ],
)
def test_a_missing_spec_file_is_no_such_file_and_queues_nothing(
    pool: Pool, tmp_path: Path, args: list[str]
) -> None:
    before = job_ids(pool)
    proc = pool.cli("submit", *args, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("gpupool: no such file: ") and "put it after --" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    assert job_ids(pool) == before  # nothing queued


def test_after_double_dash_a_yaml_name_is_the_command(pool: Pool, tmp_path: Path) -> None:
    script = tmp_path / "run.yaml"
    script.write_text("#!/bin/sh\necho ran-the-script\n")
    script.chmod(0o755)
    job_id = pool.cli_submit("--", "./run.yaml", cwd=tmp_path)
    assert pool.wait(job_id).state == "SUCCEEDED"
    assert pool.cli("logs", str(job_id)).stdout.strip() == "ran-the-script"


def test_an_executable_file_is_a_command_with_its_arguments(pool: Pool, tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text('#!/bin/sh\necho "args: $*"\n')
    script.chmod(0o755)
    job_id = pool.cli_submit("./train.sh", "--gpus", "1", cwd=tmp_path)
    job = pool.wait(job_id)
    assert job.command == ("./train.sh", "--gpus", "1") and job.resources.gpus == 0
    assert pool.cli("logs", str(job_id)).stdout.strip() == "args: --gpus 1"


def test_a_file_read_as_a_spec_that_is_not_one_says_why(pool: Pool, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hello')\n")  # not executable: read as a spec
    before = job_ids(pool)
    proc = pool.cli("submit", "train.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert "train.py" in proc.stderr and "put it after --" in proc.stderr
    assert job_ids(pool) == before  # nothing queued


def test_a_negative_looking_value_reaches_the_spec_check(pool: Pool) -> None:
    proc = pool.cli("submit", "--time", "-5m", "--", "true")
    assert proc.returncode == 2
    assert (
        proc.stderr.strip() == "gpupool: invalid job spec: time: duration must be positive: '-5m'"
    )
    # A value that is one of submit's flags is still a missing value.
    missing = pool.cli("submit", "--name", "--gpus", "1", "--", "true")
    assert missing.returncode == 2 and "--name: expected one argument" in missing.stderr
    # Words after the command are the command's, even with a leading dash.
    job_id = pool.cli_submit("--name", "dash", "--", "echo", "--time", "-5m")
    assert pool.wait(job_id).command == ("echo", "--time", "-5m")


def test_a_relative_workdir_is_taken_from_where_you_submit(pool: Pool, tmp_path: Path) -> None:
    here = tmp_path / "a" / "b"
    here.mkdir(parents=True)
    job = pool.wait(pool.cli_submit("--workdir", "..", "--", "pwd", cwd=here))
    assert job.workdir == str(tmp_path / "a")
    (here / "job.yaml").write_text("command: [pwd]\nworkdir: ../..\n")
    job = pool.wait(pool.cli_submit("job.yaml", cwd=here))
    assert job.workdir == str(tmp_path)
    assert pool.cli("logs", str(job.id)).stdout.strip() == os.path.realpath(tmp_path)


def test_submit_says_which_project_the_job_went_to(pool: Pool) -> None:
    pool.cli("project", "create", "vision", check=True)
    before = job_ids(pool)
    out = pool.cli("submit", "--project", "vision", "--", "true", check=True).stdout
    (job_id,) = job_ids(pool) - before  # the one job this submit queued
    assert out.strip() == f"Submitted job {job_id} to project vision"


def test_submit_help_states_the_rule_and_fractional_gpus(pool: Pool) -> None:
    text = pool.cli("submit", "--help", check=True).stdout
    assert "after --, everything is the command" in text
    assert ".yaml/.yml" in text and "not executable" in text
    assert "0.5" in text and "whole GPUs" not in text


@pytest.mark.parametrize(
    "args",
    [
        ("--", "true"),
        ("--name", "n", "--gpus", "0.5", "--gpu-type", "a100", "--time", "1h", "--grace", "5s",
         "--priority", "high", "--env", "A=b=c", "--workdir", "sub", "--preemptible", "--begin",
         "now+1h", "--", "echo", "--time", "x y"),
        ("--cpus", "2", "--mem", "1GB", "--project", "default", "--no-preemptible", "sh", "-c",
         "exit 0"),
    ],
    ids=["bare", "flags", "no-double-dash"],
)  # fmt: skip
def test_the_harness_queues_what_the_cli_queues(
    pool: Pool, tmp_path: Path, args: tuple[str, ...]
) -> None:
    """Pool.submit, which sets jobs up through the client, stores the job `gpupool submit`
    stores for the same words."""
    (tmp_path / "sub").mkdir()
    held = ("--begin", "now+1h") if "--begin" not in args else ()
    via_cli = pool.client.job(pool.cli_submit(*held, *args, cwd=tmp_path))
    via_harness = pool.client.job(pool.submit(*held, *args, cwd=tmp_path))
    varying = {"id", "submit_time", "begin_time", "events", "log_path", "reason", "why"}
    # What a scheduling pass says (the harness's job is read before any pass saw it).
    varying |= {"wait", "estimated_start", "reservation", "priority_factors"}
    assert {k: v for k, v in via_harness.wire.items() if k not in varying} == {
        k: v for k, v in via_cli.wire.items() if k not in varying
    }
    assert via_harness.begin_time == pytest.approx(via_cli.begin_time, abs=120)
