"""Many jobs cancelled in one request (`POST /v1/jobs/cancel`; `gpupool cancel` with filters
or several ids, the SDK's `Client.cancel_jobs`): what to select (`CancelFilters`) and what
the daemon did (`CancelReport`), read in one place as every answer is (client/views.py)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from gpupool.client.http import Client
from gpupool.client.wire_json import JsonObject, JsonValue, WireShapeError, conform
from gpupool.core.values import record
from gpupool.core.wire_shapes import BulkCancelWire


class SkipWhy(StrEnum):
    """Why a job was not cancelled: engine.bulk_cancel.Skip's values, mirrored so the
    client need not import the engine (tests/unit/test_bulk_cancel_views.py checks them)."""

    NOT_ALLOWED = "not_allowed"
    ENDED = "ended"
    NOT_FOUND = "not_found"


@record
class CancelFilters:
    """The jobs to cancel: `ids` (an array's id, every task of it) or every active job;
    of them, those every filter given keeps. `mine`: the caller's (the server names it)."""

    ids: Sequence[int] = ()
    name: str | None = None
    states: Sequence[str] | None = None  # "PENDING", "RUNNING"
    user: str | None = None
    mine: bool = False
    project: str | None = None

    def wire(self) -> JsonObject:
        body: JsonObject = {"ids": [int(i) for i in self.ids], "mine": self.mine}
        if self.name is not None:
            body["name"] = self.name
        if self.states is not None:
            body["states"] = [s.upper() for s in self.states]
        if self.user is not None:
            body["user"] = self.user
        if self.project is not None:
            body["project"] = self.project
        return body


@record
class CancelledJob:
    id: int
    user: str
    state: str  # CANCELLED; RUNNING (or a backend's PENDING) while it is being stopped
    stopping: bool  # asked to stop: SIGTERM, its grace, then SIGKILL


@record
class SkippedJob:
    id: int
    why: SkipWhy
    message: str


@record
class CancelReport:
    cancelled: tuple[CancelledJob, ...]
    skipped: tuple[SkippedJob, ...]

    @classmethod
    def read(cls, value: JsonValue) -> CancelReport:
        w = conform(BulkCancelWire, value)
        cancelled = tuple(
            CancelledJob(c["id"], c["user"], c["state"], c["stopping"]) for c in w["cancelled"]
        )
        skipped = []
        for i, s in enumerate(w["skipped"]):
            try:
                known = SkipWhy(s["why"])
            except ValueError:
                where, why = f"skipped[{i}].why", s["why"]
                raise WireShapeError(where, f"not a reason to skip: {why!r}") from None
            skipped.append(SkippedJob(s["id"], known, s["message"]))
        return cls(cancelled, tuple(skipped))


def cancel_jobs(client: Client, filters: CancelFilters) -> CancelReport:
    """Cancel every job `filters` select that the caller may cancel, in one request."""
    answer = client.request("POST", "/v1/jobs/cancel", filters.wire())
    return client._read(CancelReport.read, answer)
