"""Submitting an array (`--array 0-99%8`): one job per index, stored together.

Each task is a job of its own (its own id, history, log, retries), its spec carrying its index
and the array's throttle (`ArrayTask`), and the store gives them all the array's id: the first
task's job id (`Store.submit_array`, one transaction). The engine holds tasks beyond the
throttle (engine/gating.py); `cancel ARRAYID` cancels every task still active.
"""

from __future__ import annotations

import dataclasses

from gpupool.core.job_control import ArrayTask
from gpupool.store.submissions import NewJob


def array_tasks(new: NewJob) -> list[NewJob]:
    """The tasks of the array `new` submits, in index order (the first keeps the
    submission's token: a repeated submission gives back the same tasks)."""
    request = new.spec.array
    assert request is not None
    tasks: list[NewJob] = []
    for index in request.indices:
        spec = dataclasses.replace(new.spec, array=None, array_task=ArrayTask(index, request.limit))
        tasks.append(new._replace(spec=spec))
    return tasks
