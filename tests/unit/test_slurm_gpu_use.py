"""Used GPU-hours of a Slurm run, as Slurm measured them (backends/slurm/gpu_use.py): which
configurations keep them, sacct's TRESUsageInAve read per job (its busiest step), the figure
over the run's GPUs per task, and the runs that ended in a poll given it in one sacct.

No Slurm here measures a GPU (its gpu/nvml plugin reads real GPUs, and only slurmdbd keeps
the figure; the test cluster has neither): sacct's answers are recorded in the shape the
sacct manual and sites' output give (`gres/gpuutil=73` among the step's TRES), as the
Kubernetes API server's are (tests/kubernetes_api.py). The engine and store side, an exit
record's figure counted in `gpupool usage`, is tested in test_backend_usage.py and
test_engine_react.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from slurm_answers import AnsweringRunner

from gpupool.backends.slurm.backend import parse_config
from gpupool.backends.slurm.gpu_use import (
    measures_gpu_use,
    parse_gpu_use,
    utilization,
    with_gpu_use,
)
from gpupool.backends.slurm.runner import CommandResult
from gpupool.backends.slurm.runs import RunBook
from gpupool.core.execution import ExitReason, ExitRecord, Handle, Observation, RunState

# `sacct -n -P -o JobID,TRESUsageInAve --jobs=41,42,43`: 41 a one-node run (its batch step
# did the work, 2 GPUs summed to 150%), 42 a gang (the launcher's batch step idle, the srun
# step busy), 43 on a node whose GPUs Slurm does not read (no gres/gpuutil at all).
SACCT = """41||
41.batch|cpu=00:10:00,energy=0,fs/disk=2048,gres/gpumem=20G,gres/gpuutil=150,mem=4G,pages=0,vmem=5G
41.extern|cpu=00:00:00,energy=0,fs/disk=0,gres/gpumem=0,gres/gpuutil=0,mem=0,pages=0,vmem=0
42||
42.batch|cpu=00:00:01,gres/gpuutil=0,mem=1M
42.0|cpu=01:00:00,gres/gpumem=70G,gres/gpuutil=380,mem=30G
43||
43.batch|cpu=00:05:00,energy=0,fs/disk=10,mem=1G,pages=0,vmem=2G
"""


def test_only_slurmdbd_with_gpu_tres_keeps_gpu_use() -> None:
    base = {"AccountingStorageType": "accounting_storage/slurmdbd"}
    assert measures_gpu_use({**base, "AccountingStorageTRES": "cpu,mem,gres/gpu"})
    assert measures_gpu_use({**base, "AccountingStorageTRES": "cpu, gres/gpuutil"})
    assert not measures_gpu_use({**base, "AccountingStorageTRES": "cpu,mem,energy"})
    assert not measures_gpu_use({"AccountingStorageType": "accounting_storage/none"})
    config = "ClusterName = c\nAccountingStorageType = accounting_storage/slurmdbd\n"
    assert parse_config(config + "AccountingStorageTRES = cpu,gres/gpu\n").gpu_use
    assert not parse_config(config).gpu_use


def test_each_jobs_busiest_step_is_its_gpu_use() -> None:
    assert parse_gpu_use(SACCT) == {"41": 150.0, "42": 380.0}
    assert parse_gpu_use("") == {} and parse_gpu_use("garbage\n7|gres/gpuutil=x") == {}


@pytest.mark.parametrize(
    ("summed", "gpus", "expected"),
    [(150.0, 2, 0.75), (380.0, 4, 0.95), (0.0, 2, 0.0), (900.0, 4, 1.0), (-5.0, 1, 0.0)],
)
def test_the_figure_is_over_the_gpus_of_a_task(summed: float, gpus: int, expected: float) -> None:
    assert utilization(summed, gpus) == pytest.approx(expected)


def test_a_run_whose_gpus_are_not_known_is_not_measured() -> None:
    assert utilization(150.0, 0) is None


def _ended(start: float = 100.0) -> Observation:
    return Observation(RunState.EXITED, ExitRecord(0, None, ExitReason.EXITED, start, 200.0, "ok"))


def _book(tmp_path: Path) -> tuple[RunBook, dict[Handle, Observation]]:
    book = RunBook(tmp_path)
    shapes = {
        Handle(1): ("41", 2),
        Handle(2): ("42", 4),
        Handle(3): ("43", 1),
        Handle(4): ("44", 2),
    }
    for h, (slurm_id, gpus) in shapes.items():
        book.set_shape(h, 30.0, gpus)
        book.set_slurm_id(h, slurm_id)
    out = {h: _ended() for h in shapes}
    out[Handle(4)] = Observation(RunState.RUNNING)  # not over: not asked about
    return book, out


def test_the_runs_that_ended_are_asked_about_in_one_sacct(tmp_path: Path) -> None:
    book, out = _book(tmp_path)
    runner = AnsweringRunner(CommandResult(0, SACCT, ""), "sacct")
    got = with_gpu_use(runner, book, out)
    [argv] = runner.calls
    assert argv[0] == "sacct" and "--jobs=41,42,43" in argv and "JobID,TRESUsageInAve" in argv
    assert got[Handle(1)].exit is not None and got[Handle(1)].exit.gpu_utilization == 0.75
    assert got[Handle(2)].exit is not None and got[Handle(2)].exit.gpu_utilization == 0.95
    assert got[Handle(3)] == out[Handle(3)]  # Slurm has no figure for it: unmeasured
    assert got[Handle(4)] == out[Handle(4)]


@pytest.mark.parametrize("answer", [None, CommandResult(1, "", "slurmdbd: connection refused")])
def test_a_failed_sacct_leaves_every_run_unmeasured(
    tmp_path: Path, answer: CommandResult | None
) -> None:
    book, out = _book(tmp_path)
    assert with_gpu_use(AnsweringRunner(answer, "sacct"), book, out) == out


def test_the_gpus_per_task_survive_a_restart(tmp_path: Path) -> None:
    RunBook(tmp_path).set_shape(Handle(9), 30.0, 4)
    record = RunBook(tmp_path).get(Handle(9))  # read back from its file
    assert record is not None and (record.grace_s, record.gpus_per_task) == (30.0, 4)
