"""`queue`'s lines for array tasks (cli/array_rows.py): `12_3` for a task, an array's pending
tasks folded into `12_[4-9%2]`, and every task on its own line with --expand; the job's wire
round-trips its array fields (api/wire.py -> client/views.py)."""

from __future__ import annotations

import json

from gpupool.api.wire import job_to_wire
from gpupool.cli.array_rows import queue_rows
from gpupool.client import JobView
from gpupool.client.views import read_job
from gpupool.core.job import Job, JobSpec, JobState, Resources
from gpupool.core.job_control import AfterKind, ArrayTask, Dependency


def view(job_id: int, state: JobState, array: tuple[int, int] | None = None) -> JobView:
    spec = JobSpec(
        command=("train",),
        resources=Resources(gpus=1),
        array_task=None if array is None else ArrayTask(array[1], 2),
        after=(Dependency(1, AfterKind.ANY),) if array is None else (),
    )
    job = Job(job_id, spec, "alice", state, 10.0, array_id=None if array is None else array[0])
    return read_job(json.loads(json.dumps(job_to_wire(job))))


def test_the_wire_carries_the_array_and_dependencies() -> None:
    task = view(14, JobState.PENDING, (12, 2))
    assert (task.array_id, task.array_index, task.array_limit, task.after) == (12, 2, 2, ())
    plain = view(3, JobState.PENDING)
    assert (plain.array_id, plain.array_index, plain.after) == (None, None, ("1:any",))


def test_pending_tasks_fold_into_one_line_and_running_ones_stay_apart() -> None:
    jobs = [
        view(12, JobState.RUNNING, (12, 0)),
        view(13, JobState.RUNNING, (12, 1)),
        view(3, JobState.PENDING),
        *(view(12 + i, JobState.PENDING, (12, i)) for i in (2, 3, 4, 6)),
    ]
    labels = [row.label for row in queue_rows(jobs)]
    assert labels == ["12_0", "12_1", "3", "12_[2-4,6%2]"]
    expanded = [row.label for row in queue_rows(jobs, expand=True)]
    assert expanded == ["12_0", "12_1", "3", "12_2", "12_3", "12_4", "12_6"]


def test_a_single_pending_task_is_shown_as_itself() -> None:
    rows = queue_rows([view(12, JobState.RUNNING, (12, 0)), view(13, JobState.PENDING, (12, 1))])
    assert [r.label for r in rows] == ["12_0", "12_1"]
