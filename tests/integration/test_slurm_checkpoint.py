"""The checkpoint signal on a real Slurm: `--signal=B:USR1@N` reaches a command that
catches SIGUSR1 and is kept from one that does not (docs/backends.md), each run then ended
by Slurm at its time limit.

A cluster of its own (tests/slurm_cluster.py), with nothing else on it: slurmctld checks
time limits, and sends --signal's signal, every 30 s from its own start, and the controller
restart of test_slurm_backend.py would move those checks. In CI the checkpoint was lost
for another reason, found with the clusters' verbose logs: Slurm's SIGCONT and SIGUSR1
reach the batch shell together, and a bash trapping SIGCONT lost the SIGUSR1 trap (the
script no longer traps SIGCONT; tests/unit/test_slurm_signals.py pins it without Slurm).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster

from gpupool.backends.slurm.backend import SlurmBackend
from gpupool.core.execution import ExitReason, Handle, StopKind
from integration.slurm_backend_kit import (
    catcher,
    exited,
    make_backend,
    request,
    running,
    wait_obs,
)
from integration.slurm_pool import cluster_fixture  # noqa: F401 (the fixture)

pytestmark = pytest.mark.integration


def _slurm_says(cluster: SlurmCluster, ref: str | None) -> str:
    """What slurmctld and the slurmds logged about the run's Slurm job (their logs are
    verbose: tests/slurm_cluster.py): the signal sent, delivered to the batch shell, the
    limit; so that a failure says whose side lost the signal."""
    if ref is None:
        return ""
    number = ref.rsplit("/", 1)[1]
    said = []
    for name in ("slurmctld", *(f"slurmd-{n}" for n in cluster.nodes)):
        log = cluster.workdir / "log" / f"{name}.log"
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        said += [
            f"{name}: {line}"
            for line in lines
            if (f"JobId={number} " in line or f"[{number}.batch]" in line)
            and ("signal" in line or "imit" in line or "rror" in line)
        ]
    return "\n" + "\n".join(said)


# Runs over their time limits (slurmctld checks limits and sends --signal's signal every
# 30 s: they end 60 to 90 s after their start), one per node, both started at once.
@pytest.fixture(scope="module")
def checkpointing_run(
    cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[SlurmBackend, Handle, Path]]:
    """A 1-minute run whose command catches SIGUSR1 and runs on after it. USR1@20: sent
    once 20 s (+ up to 30) are left, so never before python has set its handler (USR1@120
    is sent at the first check, which may come as the run starts)."""
    root = tmp_path_factory.mktemp("checkpoint")
    backend = make_backend(
        cluster, root, checkpoint_signal="USR1@20", extra_sbatch_args=["--nodelist=n1"]
    )
    handle = Handle(900, 0)
    backend.launch(request(cluster, handle, catcher(root, "SIGUSR1", end=False), time_limit_s=5))
    yield backend, handle, root
    backend.signal(handle, StopKind.CANCEL)


@pytest.fixture(scope="module")
def lowered_run(
    cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[SlurmBackend, Handle]]:
    """`sleep` (it does not catch SIGUSR1) with no time limit, the default checkpoint
    signal (USR1@120), its limit lowered to 1 minute once it runs: the signal comes at the
    next check and is kept from it, and it runs on until Slurm ends it at its limit."""
    backend = make_backend(
        cluster, tmp_path_factory.mktemp("lowered"), extra_sbatch_args=["--nodelist=n2"]
    )
    handle = Handle(901, 0)
    backend.launch(request(cluster, handle, ["sleep", "600"]))
    ref = wait_obs(backend, handle, running).ref
    assert ref is not None
    assert backend.set_time_limit(handle, 60)
    limit = cluster.run(["squeue", "-h", "-j", ref.rsplit("/", 1)[1], "-o", "%l"])
    assert limit.stdout.strip() == "1:00"
    yield backend, handle
    backend.signal(handle, StopKind.CANCEL)


@pytest.mark.usefixtures("lowered_run")  # both runs going at once: the module lasts one limit
def test_checkpoint_signal_reaches_a_handler_then_time_limit(
    cluster: SlurmCluster, checkpointing_run: tuple[SlurmBackend, Handle, Path]
) -> None:
    backend, handle, root = checkpointing_run
    obs = wait_obs(backend, handle, exited, timeout=200)
    out = backend.logs(handle, 0, 1 << 16).data.decode() + _slurm_says(cluster, obs.ref)
    assert (root / "got-SIGUSR1").exists(), out  # checkpointed, then ran on to its limit
    assert obs.exit is not None and obs.exit.reason is ExitReason.TIMEOUT, out


def test_checkpoint_signal_kept_from_a_command_that_does_not_catch_it(
    cluster: SlurmCluster, lowered_run: tuple[SlurmBackend, Handle]
) -> None:
    backend, handle = lowered_run
    obs = wait_obs(backend, handle, exited, timeout=200)
    out = backend.logs(handle, 0, 1 << 16).data.decode() + _slurm_says(cluster, obs.ref)
    assert "SIGUSR1 (the checkpoint signal) not passed on" in out
    # Not killed by it (FAILED, 138): ended by Slurm at its lowered limit.
    assert obs.exit is not None and obs.exit.reason is ExitReason.TIMEOUT, out
