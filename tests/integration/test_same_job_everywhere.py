"""The same job file runs unchanged on the local pool and on a real Slurm (issue 16, "must
show"): examples/same_job/job.yaml (2 GPUs, 1 node, `distributed: torchrun`, a time limit,
an env value) with its real torch.distributed script, submitted by `gpupool submit job.yaml`
with only `--backend` added. Every rank all-reduces over gloo and prints what it saw; the
ranks, the world size, the sum and the env value must be the same everywhere.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from integration.slurm_pool import SlurmPool, cluster_fixture, pool_fixture  # noqa: F401

pytestmark = pytest.mark.integration
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "same_job"


def _ranks_seen(log: str) -> list[dict[str, object]]:
    """Each rank's JSON line, whatever prefix its backend puts before it."""
    return sorted(
        (json.loads(line[line.index("{") :]) for line in log.splitlines() if '"sum"' in line),
        key=lambda seen: str(seen["RANK"]),
    )


@pytest.mark.parametrize("backend", [None, "hpc"], ids=["local", "slurm"])
def test_the_same_job_file_runs_on_every_backend(
    pool: SlurmPool, tmp_path: Path, backend: str | None
) -> None:
    workdir = tmp_path / "same_job"
    shutil.copytree(EXAMPLE, workdir)
    extra = ["--backend", backend] if backend else []
    out = pool.cli("submit", "--parsable", "job.yaml", *extra, check=True, cwd=workdir)
    job_id = int(out.stdout.strip())
    ended = pool.wait(job_id, timeout=180)
    log = pool.cli("logs", str(job_id), check=True).stdout
    assert (ended.state.value, ended.exit_code) == ("SUCCEEDED", 0), log
    assert ended.backend == backend
    seen = _ranks_seen(log)
    assert [(s["RANK"], s["LOCAL_RANK"], s["WORLD_SIZE"], s["NODE_RANK"]) for s in seen] == [
        ("0", "0", "2", "0"),
        ("1", "1", "2", "0"),
    ], log
    assert {(s["sum"], s["GREETING"]) for s in seen} == {(1, "hello")}
