"""Array tasks in `queue`: the ID column names a task as Slurm does (`12_3`: task 3 of array
12, whose id is its first task's), and the pending tasks of an array fold into one line,
`12_[4-99%8]` (indices, and the array's %K), shown where its first pending task would be;
`queue --expand` lists every task on its own line."""

from __future__ import annotations

from collections.abc import Sequence

from gpupool.client import JobView
from gpupool.core.job_enums import JobState


class QueueRow:
    """One line of the queue: `job` (the first of the folded tasks) under the id `label`.
    A plain slotted class, not a dataclass: defining one costs `queue` about a millisecond."""

    __slots__ = ("label", "job")

    def __init__(self, label: str, job: JobView) -> None:
        self.label = label
        self.job = job


def task_label(job: JobView) -> str:
    if job.array_id is None or job.array_index is None:
        return str(job.id)
    return f"{job.array_id}_{job.array_index}"


def queue_rows(jobs: Sequence[JobView], expand: bool = False) -> list[QueueRow]:
    """The queue's lines for `jobs`, in their order, an array's pending tasks folded
    unless `expand` (module docstring)."""
    if expand:
        return [QueueRow(task_label(j), j) for j in jobs]
    pending: dict[int, list[JobView]] = {}
    for job in jobs:
        if job.array_id is not None and job.array_index is not None:
            if job.state is JobState.PENDING:
                pending.setdefault(job.array_id, []).append(job)
    rows: list[QueueRow] = []
    for job in jobs:
        array = job.array_id
        tasks = pending.get(array) if array is not None and job.state is JobState.PENDING else None
        if tasks is None:
            rows.append(QueueRow(task_label(job), job))
        elif tasks[0] is job:
            if len(tasks) == 1:
                rows.append(QueueRow(task_label(job), job))
            else:
                # Here: core.job_control's dataclasses cost `queue` a few ms to define.
                from gpupool.core.job_control import format_indices

                indices = [t.array_index for t in tasks if t.array_index is not None]
                limit = "" if job.array_limit is None else f"%{job.array_limit}"
                rows.append(QueueRow(f"{array}_[{format_indices(indices)}{limit}]", job))
    return rows
