"""Steering calls (`hold`, `release`, `update`, `cancel --signal`): functions over a
`Client`, kept out of http.py so that the commands that never steer do not load them.
Answers are read into views in one place, as the client's are (client/views.py)."""

from __future__ import annotations

from gpupool.client.http import Client
from gpupool.client.views import JobView, read_job
from gpupool.client.wire_json import JsonObject, JsonValue, conform
from gpupool.core.values import record
from gpupool.core.wire_shapes import SteeredWire


@record
class Steered:
    """A hold or release: the jobs it changed, and those it left as they were, with why."""

    changed: tuple[JobView, ...]
    left: tuple[tuple[int, str], ...]

    @classmethod
    def read(cls, value: JsonValue) -> Steered:
        w = conform(SteeredWire, value)
        jobs = tuple(JobView.read(j, f"jobs[{i}]") for i, j in enumerate(w["jobs"]))
        return cls(jobs, tuple((one["id"], one["why"]) for one in w.get("left", [])))


def hold(client: Client, job_id: int) -> Steered:
    """Hold a pending job (an array's id: its pending tasks)."""
    answer = client.request("POST", f"/v1/jobs/{int(job_id)}/hold", {})
    return client._read(Steered.read, answer)


def release(client: Client, job_id: int) -> Steered:
    answer = client.request("POST", f"/v1/jobs/{int(job_id)}/release", {})
    return client._read(Steered.read, answer)


def update(client: Client, job_id: int, changes: JsonObject) -> JobView:
    """Change a job's `time`, `priority` or `gpus` (spec/changes.py's wire form)."""
    answer = client.request("PATCH", f"/v1/jobs/{int(job_id)}", changes)
    return client._read(read_job, answer)


def send_signal(client: Client, job_id: int, signal: str) -> JobView:
    """Send `signal` (a name such as USR1, or a number) to a running job's processes."""
    answer = client.request("POST", f"/v1/jobs/{int(job_id)}/signal", {"signal": signal})
    return client._read(read_job, answer)
