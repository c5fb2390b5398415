"""Ends slurmctld has forgotten, on a real Slurm: a cluster of its own with MinJobAge=2, so
that an ended job leaves squeue within seconds (slurmctld purges on its own schedule,
about 10 s here). Without slurmdbd, the backend reads the end from the jobcomp file, then
from the run's exit file (docs/backends.md, "Slurm").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster

from gpupool.core.execution import ExitReason, Handle
from integration.slurm_pool import started_or_skipped
from integration.test_slurm_backend import DEADLINE_S, exited, make_backend, request, wait_obs

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A cluster of its own that forgets an ended job 2 s after its end (MinJobAge)."""
    yield from started_or_skipped(tmp_path_factory.mktemp("slurm"), min_job_age_s=2)


def test_exit_code_of_a_forgotten_run(cluster: SlurmCluster, tmp_path: Path) -> None:
    backend = make_backend(cluster, tmp_path)
    h = Handle(1, 0)
    backend.launch(request(cluster, h, ["sh", "-c", "exit 3"]))
    seen = wait_obs(backend, h, exited)  # from squeue, while slurmctld still has it
    assert seen.exit is not None and seen.exit.exit_code == 3
    assert seen.ref is not None
    slurm_id = seen.ref.rsplit("/", 1)[1]

    def forgotten() -> bool:
        listed = cluster.run(["squeue", "-h", "-t", "all", "-j", slurm_id, "-o", "%i"])
        return listed.stdout.strip() == ""  # an unknown id: nothing listed (and rc 1)

    cluster.wait_for(forgotten, DEADLINE_S, f"slurmctld to forget job {slurm_id}")
    from_jobcomp = backend.poll([h])[h]
    assert from_jobcomp.exit is not None
    assert (from_jobcomp.exit.exit_code, from_jobcomp.exit.reason) == (3, ExitReason.EXITED)
    assert from_jobcomp.exit.message == f"Slurm job {slurm_id} FAILED"  # the jobcomp line
    assert from_jobcomp.ref == seen.ref

    # A cluster without a jobcomp file (nor accounting): the run's own exit file.
    cluster.jobcomp.rename(cluster.jobcomp.with_suffix(".moved"))
    from_file = backend.poll([h])[h]
    assert from_file.exit is not None
    assert (from_file.exit.exit_code, from_file.exit.reason) == (3, ExitReason.EXITED)
    assert "its exit file" in from_file.exit.message
    assert from_file.ref == seen.ref

    # Neither: an end that was not recorded reads as a failure, and says so.
    backend.files(h).exit_file.unlink()
    unknown = backend.poll([h])[h]
    assert unknown.exit is not None and unknown.exit.exit_code == 1
    assert "no record of its end" in unknown.exit.message
