"""Many jobs cancelled in one transaction (store/bulk_cancel.py; issue 30, item 5): pending
ones CANCELLED, running ones asked to stop (the engine signals them), ended ones left."""

from __future__ import annotations

from sqlalchemy import event
from test_store import spec, store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.core.job import JobState
from gpupool.store import Store


def test_cancel_many_is_one_commit_whatever_the_number(store: Store) -> None:
    pending = [store.submit(spec(), "alice", 1.0) for _ in range(40)]
    running = store.submit(spec(), "alice", 1.0)
    store.commit_starts([(running.id, "n1", (0,))], store.allocation_version(), 2.0)
    ended = store.submit(spec(), "alice", 1.0)
    store.cancel_pending(ended.id, 2.0, "cancelled")
    commits: list[object] = []
    event.listen(store._engine, "commit", commits.append)  # noqa: SLF001 - what is counted
    ids = [j.id for j in pending] + [running.id, ended.id]
    done = store.cancel_many(ids, 5.0, "cancelled by alice")
    assert len(commits) == 1
    by_id = {j.id: j for j in done}
    assert sorted(by_id) == sorted(j.id for j in pending) + [running.id]  # the ended one left
    assert {by_id[j.id].state for j in pending} == {JobState.CANCELLED}
    assert store.get(pending[0].id).events[-1].cause == "cancelled by alice"
    stopping = by_id[running.id]
    assert stopping.state is JobState.RUNNING and stopping.cancel_requested
    assert store.get(ended.id).state is JobState.CANCELLED
