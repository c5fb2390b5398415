"""A drained GPU: no new job starts on it until an admin resumes it (`gpupool drain`,
docs/operations.md). A job already running there runs on to its end unless the drain was
made with `--now` (then it is requeued, with its grace period, as a preemption is).

As Slurm's DRAIN state of a node (`scontrol update nodename=N state=drain reason=...`), per
GPU: draining a node drains each of its GPUs, and each is resumed by itself or with its node.
The drain is kept in the store, so it outlives a daemon restart.
"""

from __future__ import annotations

from dataclasses import dataclass

REASON_MAX = 200  # characters of an admin's reason kept


@dataclass(frozen=True, slots=True)
class DrainedGpu:
    node: str
    gpu: int  # its index on the node
    reason: str  # the admin's words ("" when none were given)
    by: str  # who drained it
    since: float  # when (seconds since the epoch)

    @property
    def key(self) -> tuple[str, int]:
        return (self.node, self.gpu)
