"""A Ray job's state as an Observation (backends/ray/backend.py `observe`), for the cases of
issue 38: a PENDING job says why it waits, and one this backend asked to stop has ended."""

from __future__ import annotations

import json
import signal

from ray.job_submission import JobDetails, JobStatus, JobType

from gpupool.backends.ray.backend import STOPPED_WAITING, observe
from gpupool.backends.ray.capacity import NodeTotals
from gpupool.backends.ray.render import META_ASKS
from gpupool.core.execution import ExitReason, RunState, StopKind

RAY_SAYS = "Job has not started yet. It may be waiting for resources (CPUs, GPUs, memory...)."
NODES = [NodeTotals("head", {"GPU": 4.0, "CPU": 4.0}), NodeTotals("w", {"GPU": 2.0})]


def pending(gpus: float) -> JobDetails:
    return JobDetails(
        type=JobType.SUBMISSION,
        submission_id="gp-t1-9-0",
        entrypoint="exec true",
        status=JobStatus.PENDING,
        message=RAY_SAYS,
        metadata={META_ASKS: json.dumps({"GPU": gpus})},
    )


def test_a_pending_job_no_node_holds_names_the_shortfall() -> None:
    seen = observe(pending(8), "ray://h/gp-t1-9-0", False, 100.0, NODES)
    assert seen.state is RunState.QUEUED
    assert seen.detail.startswith("asks for 8 GPUs; the largest of its 2 live nodes has 4: ")


def test_a_pending_job_that_fits_a_node_keeps_ray_s_words() -> None:
    assert observe(pending(4), "r", False, 100.0, NODES).detail == RAY_SAYS
    assert observe(pending(8), "r", False, 100.0, None).detail == RAY_SAYS  # nodes unknown


def test_a_pending_job_asked_to_stop_has_ended_as_asked() -> None:
    for kind, reason in [
        (StopKind.CANCEL, ExitReason.CANCELLED),
        (StopKind.PREEMPT, ExitReason.PREEMPTED),
    ]:
        seen = observe(pending(8), "r", False, 100.0, NODES, stop_asked=kind)
        assert seen.state is RunState.EXITED and seen.exit is not None
        assert (seen.exit.reason, seen.exit.exit_code) == (reason, 128 + signal.SIGTERM)
        assert seen.exit.message == STOPPED_WAITING
