"""What the API reads of the engine's view: a copy published after each change, never
changed after (so API threads read it without a lock), with the last pass's decision.

`gpupool queue` is served from it, not from the store: the active jobs are in memory, and
the finished ones (asked for with --all) are read from the store by state. Its default page
is what a user looks for first: the running jobs, then the pending ones in the order the
last pass took them (the head of the queue), then a count of the rest.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from operator import attrgetter

from gpupool.core.job import Job, JobState
from gpupool.core.job_query import JobPage, JobQuery, Order
from gpupool.policy import Decision


class JobsView:
    """A read-only copy of the engine's active jobs and last decision."""

    def __init__(self, jobs: Mapping[int, Job], decision: Decision, generation: int) -> None:
        self.jobs = jobs
        self.decision = decision
        self.generation = generation
        self._places: dict[int, int] | None = None
        self._in_queue_order: tuple[Job, ...] | None = None
        self._lock = threading.Lock()

    @classmethod
    def empty(cls) -> JobsView:
        return cls({}, Decision(), -1)

    def places(self) -> dict[int, int]:
        """Each pending job's place in the last pass's queue order (`Decision.order`, the
        order `decide` took them in); worked out once per view, when first asked."""
        with self._lock:
            if self._places is None:
                self._places = {job_id: i for i, job_id in enumerate(self.decision.order)}
            return self._places

    def in_queue_order(self) -> tuple[Job, ...]:
        """Every active job in queue order (`queue_ordered`): sorted once per view, when
        first asked, so that each `gpupool queue` of an unchanged queue only filters and
        slices it (a view is never changed after it is published)."""
        ordered = self._in_queue_order
        if ordered is None:
            ordered = tuple(queue_ordered(self.jobs.values(), self.places()))
            with self._lock:
                self._in_queue_order = ordered
        return ordered

    def select(self, query: JobQuery) -> list[Job]:
        """The active jobs that match `query` (not paged), in its order."""
        wanted = query.wanted()
        if query.ids is not None:  # a few named jobs of a long queue: looked up, not scanned
            among = [self.jobs[i] for i in query.ids if i in self.jobs]
            jobs = [j for j in among if j.state in wanted and query.matches(j)]
            if query.order is Order.ID:
                return sorted(jobs, key=_by_id)
            return queue_ordered(jobs, self.places())
        if query.order is Order.QUEUE:  # the order kept: a filter of it is in order too
            ordered = self.in_queue_order()
            if _all_of(query, wanted):
                return list(ordered)
            return [j for j in ordered if j.state in wanted and query.matches(j)]
        jobs = [j for j in self.jobs.values() if j.state in wanted and query.matches(j)]
        jobs.sort(key=_by_id)
        return jobs


_ACTIVE = frozenset(s for s in JobState if not s.terminal)


def _all_of(query: JobQuery, wanted: frozenset[JobState]) -> bool:
    """Whether `query` keeps every active job (the default `gpupool queue`)."""
    return (
        wanted >= _ACTIVE
        and query.user is None
        and query.project is None
        and query.since is None
        and query.array_id is None
    )


_STATE = attrgetter("state")


def _by_id(job: Job) -> int:
    return job.id


_RANK = {JobState.RUNNING: 0, JobState.PENDING: 1}


def queue_ordered(jobs: Iterable[Job], places: Mapping[int, int]) -> list[Job]:
    """Running jobs by id, then pending ones by their place in the queue (jobs the last
    pass did not see last, by id), then any other by id."""
    unplaced = len(places)

    def key(job: Job) -> tuple[int, int, int]:
        group = _RANK.get(job.state, 2)
        place = places.get(job.id, unplaced) if group == 1 else 0
        return (group, place, job.id)

    return sorted(jobs, key=key)


def page(query: JobQuery, active: list[Job], finished: list[Job]) -> JobPage:
    """The page `query` asks for, of the active jobs (`select`ed) and the finished ones
    that match it (read from the store, any order). A job that ended between the view's
    copy and the store's read is in both: the store's copy, the newer, is the one kept.
    """
    finished = sorted(finished, key=_by_id)
    if finished:
        ended = {job.id for job in finished}
        active = [job for job in active if job.id not in ended]
    if query.order is Order.ID:
        merged = sorted([*active, *finished], key=_by_id) if finished else active
    else:
        merged = [*active, *finished]
    # Counted in C (Counter over attrgetter): a loop reading each job's `state.value` was
    # a third of a `queue` request's time with 10,000 pending.
    counts = {state.value: n for state, n in Counter(map(_STATE, merged)).items()}
    start = max(query.offset, 0)
    end = None if query.limit is None else start + max(query.limit, 0)
    return JobPage(tuple(merged[start:end]), len(merged), counts)
