"""`queue` served from the engine's view (engine/view.py): its order, pages, filters and
counts, the finished jobs read from the store, and a caller seeing its own submission."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from executor_helpers import stop_everything
from hypothesis import given, settings
from hypothesis import strategies as st
from test_store import spec, store_url_fixture  # noqa: F401  (fixture)

from gpupool.core.execution import RunAs
from gpupool.core.job import PRIORITY_CLASSES, Job, JobSpec, JobState, Resources
from gpupool.core.job_query import JobQuery, Order
from gpupool.engine import Engine
from gpupool.engine.view import JobsView, page, queue_ordered
from gpupool.executor import LocalExecutor
from gpupool.inventory import resolve_inventory
from gpupool.policy import Decision
from gpupool.service import PoolService
from gpupool.store import Store

FAR = time.time() + 365 * 86400.0


@pytest.fixture(name="pool")
def pool_fixture(store_url: str, tmp_path: Path) -> Iterator[tuple[Store, Engine, PoolService]]:
    store = Store.open(store_url)
    # The jobs' users are names here, not Unix users: run them as we are.
    executor = LocalExecutor(tmp_path / "jobs-state", run_as=RunAs.DAEMON)
    inventory = resolve_inventory(gpus="2xA100-80GB")
    engine = Engine(store, executor, inventory)
    service = PoolService(store, executor, engine, inventory)
    yield store, engine, service
    engine.stop()
    stop_everything(executor)
    executor.close()
    store.close()


def hold_both_gpus(pool: tuple[Store, Engine, PoolService], now: float) -> Job:
    """A job started on both GPUs (the store's commit, as a pass would make it): what is
    submitted next waits."""
    store, engine, service = pool
    node = engine.inventory.nodes[0].name
    holder = service.submit(
        JobSpec(command=("sleep", "30"), workdir="/", resources=Resources(gpus=2)), "carol", now
    )
    store.commit_starts([(holder.id, node, (0, 1))], store.allocation_version(), now)
    engine.stored(store.get(holder.id))
    return holder


def ids(jobs: tuple[Job, ...] | list[Job]) -> list[int]:
    return [j.id for j in jobs]


def test_the_first_page_is_the_running_jobs_then_the_head_of_the_queue(
    pool: tuple[Store, Engine, PoolService],
) -> None:
    store, engine, service = pool
    now = time.time()
    holder = hold_both_gpus(pool, now)
    normal = [service.submit(spec(workdir="/"), "alice", now) for _ in range(2)]
    high = service.submit(spec(workdir="/", priority=PRIORITY_CLASSES["high"]), "bob", now)
    engine.run_pass()  # launches the holder, ranks the others
    found = service.list_jobs(JobQuery(order=Order.QUEUE, limit=2))
    assert ids(found.jobs) == [holder.id, high.id]  # running, then the head of the queue
    assert (found.total, dict(found.counts)) == (4, {"RUNNING": 1, "PENDING": 3})
    rest = service.list_jobs(JobQuery(order=Order.QUEUE, limit=2, offset=2))
    assert ids(rest.jobs) == [normal[0].id, normal[1].id]


def test_filters_and_finished_jobs_from_the_store(
    pool: tuple[Store, Engine, PoolService],
) -> None:
    store, engine, service = pool
    now = time.time()
    a = service.submit(spec(workdir="/", begin_time=FAR), "alice", now)
    b = service.submit(spec(workdir="/", begin_time=FAR), "bob", now)
    c = service.submit(spec(workdir="/", begin_time=FAR), "alice", now)
    service.cancel(b.id, "bob", now)
    assert ids(service.list_jobs(JobQuery()).jobs) == [a.id, c.id]
    assert ids(service.list_jobs(JobQuery(user="alice")).jobs) == [a.id, c.id]
    everything = service.list_jobs(JobQuery(include_finished=True))
    assert ids(everything.jobs) == [a.id, b.id, c.id]
    assert dict(everything.counts) == {"PENDING": 2, "CANCELLED": 1}
    cancelled = service.list_jobs(JobQuery(states=frozenset({JobState.CANCELLED})))
    assert ids(cancelled.jobs) == [b.id]
    assert service.list_jobs(JobQuery(project="nope")).total == 0


def test_a_caller_sees_its_own_submission_at_once_with_the_engine_running(
    pool: tuple[Store, Engine, PoolService],
) -> None:
    _, engine, service = pool
    engine.start()
    for _ in range(20):
        job = service.submit(spec(workdir="/", begin_time=FAR), "alice", time.time())
        assert job.id in ids(service.list_jobs(JobQuery()).jobs)


def _job(job_id: int, state: JobState) -> Job:
    return Job(job_id, spec(), "u", state, 1.0)


def test_queue_order_puts_unranked_pending_jobs_after_the_ranked_ones() -> None:
    jobs = [_job(5, JobState.PENDING), _job(1, JobState.PENDING), _job(3, JobState.RUNNING)]
    jobs.append(_job(2, JobState.PENDING))
    ordered = queue_ordered(jobs, {2: 0, 5: 1})  # 1 came after the last pass
    assert ids(ordered) == [3, 2, 5, 1]


def test_a_page_merges_finished_jobs_by_id_and_counts_every_match() -> None:
    active = [_job(2, JobState.RUNNING), _job(4, JobState.PENDING)]
    finished = [_job(3, JobState.FAILED), _job(1, JobState.SUCCEEDED)]
    got = page(JobQuery(include_finished=True, limit=3), active, finished)
    assert ids(got.jobs) == [1, 2, 3]
    assert got.total == 4
    assert dict(got.counts) == {"SUCCEEDED": 1, "RUNNING": 1, "FAILED": 1, "PENDING": 1}
    queued = page(JobQuery(include_finished=True, order=Order.QUEUE), active, finished)
    assert ids(queued.jobs) == [2, 4, 1, 3]


@pytest.mark.parametrize("order", [Order.ID, Order.QUEUE])
def test_a_job_that_ended_between_the_view_and_the_store_is_listed_once(order: Order) -> None:
    # The view still had job 6 running when the store's read found it finished (the
    # integration test test_every_acknowledged_submission_exists_exactly_once saw [6, 6]).
    active = [_job(6, JobState.RUNNING), _job(7, JobState.PENDING)]
    finished = [_job(6, JobState.SUCCEEDED)]
    got = page(JobQuery(include_finished=True, order=order), active, finished)
    assert sorted(ids(got.jobs)) == [6, 7]
    assert [j.state for j in got.jobs if j.id == 6] == [JobState.SUCCEEDED]
    assert got.total == 2 and dict(got.counts) == {"SUCCEEDED": 1, "PENDING": 1}


def test_a_reason_reaches_the_store_only_once_the_view_that_explains_it_is_out(
    pool: tuple[Store, Engine, PoolService],
) -> None:
    """`show` reads a job's reason from the store and its explanation (`why`) from the
    published view: a reason stored before its pass's view was published read, for that
    moment, as a reason with no why (seen in a loaded CI run)."""
    store, engine, service = pool
    now = time.time()
    hold_both_gpus(pool, now)
    engine.run_pass()
    waiting = service.submit(spec(workdir="/"), "bob", now)
    explained_when_stored: list[bool] = []
    set_reasons = store.set_reasons

    def checking(due: dict[int, str]) -> None:
        decision = engine.view(fresh=False).decision
        explained_when_stored.extend(job_id in decision.pending for job_id in due)
        set_reasons(due)

    store.set_reasons = checking  # type: ignore[method-assign]
    engine.run_pass()
    assert explained_when_stored == [True]  # its reason stored, its why already out
    assert service.get(waiting.id).reason and service.explain(waiting.id).status is not None


_ACTIVE_STATES = [s for s in JobState if not s.terminal]


@st.composite
def _view_and_query(draw: st.DrawFn) -> tuple[JobsView, JobQuery]:
    n = draw(st.integers(0, 30))
    jobs = {
        i: Job(
            i,
            JobSpec(command=("true",), project=draw(st.sampled_from(["p", "q"]))),
            draw(st.sampled_from(["ann", "bob"])),
            draw(st.sampled_from(_ACTIVE_STATES)),
            float(draw(st.integers(0, 5))),
        )
        for i in range(1, n + 1)
    }
    pending = [i for i, j in jobs.items() if j.state is JobState.PENDING]
    ranked = draw(st.permutations(pending))[: draw(st.integers(0, len(pending)))]
    view = JobsView(jobs, Decision(order=tuple(ranked)), 1)  # as a pass ranked them
    states = draw(st.one_of(st.none(), st.sets(st.sampled_from(list(JobState)), min_size=1)))
    query = JobQuery(
        states=None if states is None else frozenset(states),
        include_finished=draw(st.booleans()),
        user=draw(st.one_of(st.none(), st.sampled_from(["ann", "bob"]))),
        project=draw(st.one_of(st.none(), st.sampled_from(["p", "q"]))),
        order=draw(st.sampled_from(list(Order))),
        since=draw(st.one_of(st.none(), st.floats(0, 5))),
        ids=draw(st.one_of(st.none(), st.frozensets(st.integers(0, n + 2)))),
    )
    return view, query


@settings(max_examples=300, deadline=None)
@given(_view_and_query())
def test_the_kept_queue_order_selects_what_sorting_the_matches_would(
    case: tuple[JobsView, JobQuery],
) -> None:
    """`select` filters the view's queue order, sorted once per view, instead of sorting
    the matches of each query: the same jobs in the same order, whatever the query."""
    view, query = case
    wanted = query.wanted()
    among = (
        view.jobs.values()
        if query.ids is None
        else [view.jobs[i] for i in query.ids if i in view.jobs]
    )
    matches = [j for j in among if j.state in wanted and query.matches(j)]
    if query.order is Order.ID:
        expected = sorted(matches, key=lambda j: j.id)
    else:
        expected = queue_ordered(matches, view.places())
    assert ids(view.select(query)) == ids(expected)
    assert ids(view.select(query)) == ids(expected)  # again, from the kept order
