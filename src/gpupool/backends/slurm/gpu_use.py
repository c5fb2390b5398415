"""What a Slurm run's GPUs did, as Slurm measured it: `gres/gpuutil` in the TRESUsageInAve
of the job's steps, read with one `sacct` per poll for the runs that ended in it
(docs/monitoring.md, "Backends' jobs: allocated always, used where the engine
measures it").

Slurm measures it only where its GPU plugin reads the GPUs (gres.conf `AutoDetect=nvml`,
the gpu/nvml plugin) and accounting storage keeps it: slurmdbd, with `gres/gpu` (which
brings `gres/gpuutil`) or `gres/gpuutil` in `AccountingStorageTRES`. `measures_gpu_use`
says whether the cluster's configuration does; elsewhere a run's use is not known (None),
and `gpupool usage` says so.

How the figure reads (Slurm's gpu/nvml plugin): per task, the SM utilization of each GPU
the task uses, in percent, added up over its GPUs; TRESUsageInAve is its mean over the
step's tasks and time. A run of the pool's has one task per node holding the node's GPUs
(render.py), so its utilization is the figure over 100 x its GPUs per node. A job's steps
each have their own (the batch step, one per `srun`, the extern step): the work is in the
busiest, since a launcher's step and the extern step hold the GPUs without using them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from gpupool.backends.slurm.runner import CommandRunner, SlurmUnreachable
from gpupool.backends.slurm.runs import RunBook
from gpupool.core.execution import Handle, Observation, RunState

FIELDS = "JobID,TRESUsageInAve"
GPU_UTIL = "gres/gpuutil"


def measures_gpu_use(conf: Mapping[str, str]) -> bool:
    """Whether `scontrol show config` (as key -> value) says Slurm keeps GPU utilization."""
    if conf.get("AccountingStorageType", "") != "accounting_storage/slurmdbd":
        return False
    tres = {t.strip() for t in conf.get("AccountingStorageTRES", "").split(",")}
    return GPU_UTIL in tres or "gres/gpu" in tres


def parse_gpu_use(text: str) -> dict[str, float]:
    """`sacct -n -P -o JobID,TRESUsageInAve --jobs=...` (a line per job and per step, `|`
    between fields): each job's busiest step's `gres/gpuutil`, in percent summed over a
    task's GPUs. A job none of whose steps has the figure is absent."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        step, sep, tres = line.partition("|")
        if not sep:
            continue
        job_id = step.strip().split(".")[0]
        for item in tres.split(","):
            key, eq, value = item.partition("=")
            if key.strip() != GPU_UTIL or not eq:
                continue
            try:
                pct = float(value.strip().rstrip("%"))
            except ValueError:
                continue
            out[job_id] = max(out.get(job_id, 0.0), pct)
    return out


def utilization(pct_summed: float, gpus_per_task: int) -> float | None:
    """The run's mean utilization of its GPUs (0..1) from `parse_gpu_use`'s figure; None
    when its GPUs per task are not known (a run launched by an older version)."""
    if gpus_per_task <= 0:
        return None
    return min(max(pct_summed, 0.0) / (100.0 * gpus_per_task), 1.0)


def with_gpu_use(
    runner: CommandRunner, book: RunBook, out: dict[Handle, Observation]
) -> dict[Handle, Observation]:
    """`out` with the runs that ended in it carrying their GPUs' utilization as Slurm
    measured it: one sacct for all of them; one that fails leaves them unmeasured (None),
    as a run Slurm has no figure for."""
    ended: dict[str, tuple[Handle, int]] = {}  # Slurm job id -> the run, its GPUs per task
    for h, obs in out.items():
        record = book.get(h)
        if obs.state is RunState.EXITED and obs.exit is not None and record is not None:
            if record.slurm_id and record.gpus_per_task > 0:
                ended[record.slurm_id] = (h, record.gpus_per_task)
    if not ended:
        return out
    argv = ["sacct", "-n", "-P", f"--jobs={','.join(ended)}", "-o", FIELDS]
    try:
        res = runner.run(argv)
    except SlurmUnreachable:
        return out
    if not res.ok:
        return out
    measured = dict(out)
    for slurm_id, pct in parse_gpu_use(res.stdout).items():
        if slurm_id not in ended:
            continue
        run, gpus_per_task = ended[slurm_id]
        obs = out[run]
        assert obs.exit is not None  # as `ended` was made
        used = utilization(pct, gpus_per_task)
        measured[run] = dataclasses.replace(
            obs, exit=dataclasses.replace(obs.exit, gpu_utilization=used)
        )
    return measured
