"""What a submission's answer is read into on the CLI's path: `gpupool submit` prints its
id and project only, and a batch answers its ids (client/http.py's `submit_receipt` and
`submit_batch`)."""

from __future__ import annotations

from gpupool.client.wire_json import JsonValue, conform


class SubmitReceipt:
    """What `gpupool submit` prints of the job it queued: its `id` (an array's first task),
    its `project`, and the daemon's `warnings` (their messages: the backend it goes to
    cannot be reached now). A plain slotted class: the views (client/views.py) are frozen
    dataclasses, whose module costs a submission ~10 ms to import (dataclasses, inspect)."""

    __slots__ = ("id", "project", "warnings")

    def __init__(self, id: int, project: str, warnings: tuple[str, ...] = ()) -> None:
        self.id = id
        self.project = project
        self.warnings = warnings


def read_receipt(value: JsonValue) -> SubmitReceipt:
    """The receipt in a job's answer, checked against the job's shape as views.read_job is."""
    from gpupool.core.wire_shapes import JobWire

    w = conform(JobWire, value)
    warnings = tuple(warning["message"] for warning in w.get("warnings", []))
    return SubmitReceipt(w["id"], w["project"], warnings)


def read_batch_ids(value: JsonValue) -> list[int]:
    """The ids in a batch's answer (`{"ids": [...]}`)."""
    from gpupool.core.wire_shapes import BatchIdsWire

    return conform(BatchIdsWire, value)["ids"]
