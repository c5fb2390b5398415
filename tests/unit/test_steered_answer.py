"""A hold's or release's answer (api/steering.py) is encoded by `JSONResponse` at once,
not walked by FastAPI's `jsonable_encoder` first (~300 ms for a 1,000-task array): the
bytes must be the ones FastAPI's walk would give, for a job with every field set, a
pass's explanation, a hold and a history."""

from __future__ import annotations

from dataclasses import replace

from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from test_client_views import _pending_job
from test_store import full_spec

from gpupool.api.wire import job_to_wire
from gpupool.core.job import Hold, JobState, Transition
from gpupool.policy.reasons import Dimension, Insufficient
from gpupool.policy.snapshot import PriorityFactors, Reservation
from gpupool.policy.status import Code, Rule, Status
from gpupool.service.pool_service import Explanation


def test_a_steered_answer_is_the_bytes_fastapis_encoder_gives() -> None:
    held = replace(full_spec(), hold=Hold.ADMIN, after=())
    history = (
        Transition(100.0, None, JobState.PENDING, "submitted by alice; time limit 1d0h"),
        Transition(150.5, JobState.PENDING, JobState.PENDING, "held by root"),
    )
    job = replace(_pending_job(), spec=held, events=history, reason="JobHeldAdmin")
    explain = Explanation(
        status=Status(
            Code.RESOURCES, Rule.NO_FIT, short=Insufficient("box", Dimension.GPU_COUNT, 4, 1, 8)
        ),  # fmt: skip
        estimated_start=700.25,
        reservation=Reservation(7, "box", (0, 1, 2, 3), 700.25),
        priority_factors=PriorityFactors(7, 200, 0.5, 0.1, 0.2, 9.5),
    )
    answer = {
        "jobs": [job_to_wire(job, explain, "/log"), job_to_wire(job, None, "", 0.5, False)],
        "left": [{"id": 8, "why": "already held"}],
    }
    assert JSONResponse(answer).body == JSONResponse(jsonable_encoder(answer)).body
