"""Which jobs a listing asks for (`JobQuery`), in what order, and the page it gets back: the
query `gpupool queue` and `GET /v1/jobs` send, answered by the engine's view."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from gpupool.core.job import Job, JobState


class Order(StrEnum):
    ID = "id"  # by job id: the order jobs were submitted in
    QUEUE = "queue"  # running, then pending as the last pass ranked them, then the rest


@dataclass(frozen=True)
class JobQuery:
    """Which jobs to list: `states` (None: the active ones, and the finished ones too with
    `include_finished`), of `user` and `project` when given, submitted at `since` (epoch
    seconds) or later when given, among `ids` when given, the tasks of the array `array_id`
    when given, `limit` of them (None: all) after skipping `offset`, in `order`."""

    states: frozenset[JobState] | None = None
    include_finished: bool = False
    user: str | None = None
    project: str | None = None
    limit: int | None = None
    offset: int = 0
    order: Order = Order.ID
    since: float | None = None
    ids: frozenset[int] | None = None  # only these jobs (squeue -j)
    array_id: int | None = None  # only the tasks of this array (its id: its first task's)

    def wanted(self) -> frozenset[JobState]:
        if self.states is not None:
            return self.states
        if self.include_finished:
            return frozenset(JobState)
        return frozenset(s for s in JobState if not s.terminal)

    def matches(self, job: Job) -> bool:
        return (
            (self.user is None or job.user == self.user)
            and (self.project is None or job.spec.project == self.project)
            and (self.since is None or job.submit_time >= self.since)
            and (self.ids is None or job.id in self.ids)
            and (self.array_id is None or job.array_id == self.array_id)
        )


@dataclass(frozen=True)
class JobPage:
    jobs: tuple[Job, ...]
    total: int  # jobs that match the query, on every page
    counts: Mapping[str, int]  # of those, how many in each state
