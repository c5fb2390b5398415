"""A Slurm backend that cannot be reached, through the real daemon and CLI: `gpupool backends`
shows why in one line, and a submission to it is queued with a warning.

No Slurm runs here: the daemon's PATH starts with a directory of fake Slurm commands that
answer as they do when slurmctld is down (two lines on stderr, exit 1), and its gpupool.toml
points the backend at a slurm.conf that does not exist, so no real cluster can be reached.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.pool_harness import Pool

SLURM_DOWN = """#!/bin/sh
name=$(basename "$0")
echo "$name: error: Unable to contact slurm controller (connect failure)" >&2
echo "$name: fatal: no answer from slurmctld" >&2
exit 1
"""
COMMANDS = ("sinfo", "squeue", "sbatch", "scancel", "scontrol", "sacct", "srun")
SAID = (
    "sinfo: error: Unable to contact slurm controller (connect failure); "
    "sinfo: fatal: no answer from slurmctld"
)


class SlurmDownPool(Pool):
    """A pool whose daemon finds the fake Slurm commands first on its PATH."""

    fake_bin: Path

    def daemon_env(self) -> dict[str, str]:
        env = dict(super().daemon_env())
        env["PATH"] = f"{self.fake_bin}:{env.get('PATH', '/usr/bin:/bin')}"
        return env


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[SlurmDownPool]:
    fake_bin = tmp_path / "fake-bin"
    fake_bin.mkdir()
    for name in COMMANDS:
        command = fake_bin / name
        command.write_text(SLURM_DOWN)
        command.chmod(0o755)
    p = SlurmDownPool(tmp_path / "pool", gpus="1xA100-80GB")
    p.fake_bin = fake_bin
    p.state_dir.mkdir(parents=True)
    (p.state_dir / "gpupool.toml").write_text(
        '[backends.hpc]\nkind = "slurm"\n'
        f'slurm_conf = "{tmp_path / "no-such" / "slurm.conf"}"\n'
        f'output_dir = "{tmp_path / "out"}"\n'
        "command_timeout_s = 5\n"
    )
    p.start()
    try:
        yield p
    finally:
        p.cleanup()


def test_backends_shows_an_unreachable_slurm_in_one_line(pool: SlurmDownPool) -> None:
    out = pool.cli("backends", check=True).stdout
    assert "\\n" not in out, out
    (row,) = [line for line in out.splitlines() if line.startswith("hpc ")]
    assert " NO " in row, row
    assert row.rstrip().endswith(SAID), row


def test_a_submission_to_an_unreachable_backend_is_queued_with_a_warning(
    pool: SlurmDownPool,
) -> None:
    done = pool.cli("submit", "--parsable", "--backend", "hpc", "--", "true", check=True)
    job_id = int(done.stdout.strip())
    assert done.stderr.splitlines() == [
        f"gpupool: warning: job {job_id} is queued, but backend hpc cannot be reached now "
        f"({SAID}); `gpupool backends` shows its health"
    ]
    assert pool.client.job(job_id).backend == "hpc"
    # A submission to the local pool says nothing of backends.
    local = pool.cli("submit", "--parsable", "--", "true", check=True)
    assert local.stderr == ""
