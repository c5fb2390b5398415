"""The pass's gating once what the view cannot tell is read from the store (engine/gating.py):
the final states of `--after` dependencies that ended out of the engine's sight (before a
restart)."""

from __future__ import annotations

from gpupool.core.job import JobState
from gpupool.engine.contracts import EngineStore
from gpupool.engine.gating import Gating
from gpupool.engine.state import EngineState


def gating_read(state: EngineState, store: EngineStore) -> Gating:
    """The pass's gating, once the final states of dependencies the view does not know are
    read from the store: a dependency the store does not have counts as ended FAILED (never
    met by `:ok`); an array's id, the outcome of every task once all have ended."""
    gating = state.gating()
    if not gating.unknown:
        return gating
    from gpupool.store import UnknownJob

    for job_id in sorted(gating.unknown):
        try:
            job = store.get(job_id)
        except UnknownJob:
            state.ended.record(job_id, JobState.FAILED)
            continue
        if job.array_id == job_id:  # an array's id: every task of it (engine/gating.py)
            tasks = store.list_jobs(include_finished=True, array_id=job_id)
            if all(task.state.terminal for task in tasks):
                state.ended.record_array(job_id, tasks)
        elif job.state.terminal:
            state.ended.record(job_id, job.state)
    return state.gating()
