"""The daemon lease in the database (store/lease.py), on SQLite and on PostgreSQL."""

from __future__ import annotations

import threading

import pytest
from test_store import spec, start, store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.store import Lease, LeaseHeld, LeaseHolder, Store

HERE = LeaseHolder("box", "/var/lib/gpupool", 100)
ELSEWHERE = LeaseHolder("box", "/home/alice/pool", 200)
OTHER_HOST = LeaseHolder("other", "/var/lib/gpupool", 300)


def test_a_fresh_database_has_no_lease_and_the_first_daemon_takes_it(store: Store) -> None:
    assert store.lease() is None
    got = store.acquire_lease(HERE, now=1000.0, ttl_s=30)
    assert got == Lease(HERE, 1, 1000.0, 1000.0, 30.0)
    assert store.lease() == got


def test_another_daemon_is_refused_while_the_holder_renews(store: Store) -> None:
    held = store.acquire_lease(HERE, now=1000.0, ttl_s=30)
    assert store.renew_lease(held, now=1020.0)
    for other in (ELSEWHERE, OTHER_HOST):
        with pytest.raises(LeaseHeld) as info:
            store.acquire_lease(other, now=1045.0)
        assert info.value.lease.holder == HERE
        assert info.value.lease.age(info.value.now) == 25.0
        assert info.value.running_jobs == 0
    assert store.lease() == Lease(HERE, 1, 1000.0, 1020.0, 30.0)


def test_the_same_state_dir_takes_it_over_at_once(store: Store) -> None:
    """A restart after SIGKILL: the new daemon holds the state dir's flock."""
    held = store.acquire_lease(HERE, now=1000.0)
    restarted = LeaseHolder(HERE.host, HERE.state_dir, 101)
    again = store.acquire_lease(restarted, now=1001.0)
    assert (again.holder.pid, again.generation) == (101, 2)
    assert not store.renew_lease(held, now=1002.0)  # the old generation is gone
    assert store.renew_lease(again, now=1002.0)


def test_the_same_path_on_another_host_is_another_place(store: Store) -> None:
    store.acquire_lease(HERE, now=1000.0)
    with pytest.raises(LeaseHeld):
        store.acquire_lease(OTHER_HOST, now=1001.0)


def test_an_expired_lease_is_taken_over_and_its_old_holder_learns_it(store: Store) -> None:
    held = store.acquire_lease(HERE, now=1000.0, ttl_s=30)
    with pytest.raises(LeaseHeld):
        store.acquire_lease(ELSEWHERE, now=1030.0)  # 30 s: not expired yet
    taken = store.acquire_lease(ELSEWHERE, now=1030.5)
    assert (taken.holder, taken.generation) == (ELSEWHERE, 2)
    assert not store.renew_lease(held, now=1031.0)  # the frozen daemon wakes up: lost
    store.release_lease(held, now=1031.0)  # and its release changes nothing
    assert store.lease() == taken


def test_a_released_lease_goes_to_anyone_when_no_job_runs(store: Store) -> None:
    held = store.acquire_lease(HERE, now=1000.0)
    store.release_lease(held, now=1001.0)
    released = store.lease()
    assert released is not None and released.released_at == 1001.0
    assert store.acquire_lease(ELSEWHERE, now=1002.0).holder == ELSEWHERE


def test_jobs_running_under_a_stopped_holder_keep_others_out(store: Store) -> None:
    """Their supervisors live in the holder's state dir: only that daemon may re-adopt them."""
    held = store.acquire_lease(HERE, now=1000.0, ttl_s=30)
    job = store.submit(spec(), "alice", 1000.0).id
    start(store, job, now=1001.0)
    for stop in ("expired", "released"):
        if stop == "released":
            store.release_lease(held, now=1002.0)
        with pytest.raises(LeaseHeld) as info:
            store.acquire_lease(ELSEWHERE, now=2000.0)
        assert info.value.running_jobs == 1 and info.value.lease.holder == HERE
    back = store.acquire_lease(LeaseHolder(HERE.host, HERE.state_dir, 7), now=2000.0)
    assert back.released_at is None and back.generation == 2


def test_two_daemons_acquiring_at_once_get_it_once(store: Store) -> None:
    holders = [LeaseHolder("box", f"/pool/{i}", i) for i in range(4)]
    barrier = threading.Barrier(len(holders))
    won: list[LeaseHolder] = []
    refused: list[LeaseHolder] = []
    errors: list[BaseException] = []

    def body(h: LeaseHolder) -> None:
        barrier.wait()
        try:
            store.acquire_lease(h, now=1000.0)
            won.append(h)
        except LeaseHeld:
            refused.append(h)
        except BaseException as e:  # noqa: BLE001  (asserted on)
            errors.append(e)

    threads = [threading.Thread(target=body, args=(h,)) for h in holders]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert len(won) == 1 and len(refused) == 3
    lease = store.lease()
    assert lease is not None and lease.holder == won[0] and lease.generation == 1


def test_check_lease_refuses_as_acquire_would_and_writes_nothing(store: Store) -> None:
    store.check_lease(HERE, now=1000.0)  # free
    assert store.lease() is None
    held = store.acquire_lease(HERE, now=1000.0, ttl_s=30)
    store.check_lease(LeaseHolder(HERE.host, HERE.state_dir, 5), now=1001.0)  # same place
    with pytest.raises(LeaseHeld):
        store.check_lease(ELSEWHERE, now=1001.0)
    store.check_lease(ELSEWHERE, now=1031.0)  # expired, no job running
    job = store.submit(spec(), "alice", 1000.0).id
    start(store, job, now=1001.0)
    with pytest.raises(LeaseHeld) as info:
        store.check_lease(ELSEWHERE, now=1031.0)
    assert info.value.running_jobs == 1
    assert store.lease() == held


def test_a_daemon_whose_lease_was_taken_over_cannot_commit_starts(store_url: str) -> None:
    """The lease fences the commit of starts (issue 31; Nomad's plan applier fences on
    leadership): a daemon frozen past its ttl may have decided a pass before it learns, at its
    next renewal, that another daemon took the lease over. Its commit is refused in the
    transaction, with nothing written; the new holder's goes through."""
    from gpupool.store import LeaseLost

    stale, fresh = Store.open(store_url), Store.open(store_url)
    try:
        stale.acquire_lease(HERE, now=1000.0, ttl_s=30)
        job = stale.submit(spec(), "alice", 1000.0)
        version = stale.allocation_version()
        fresh.acquire_lease(ELSEWHERE, now=1031.0)  # HERE froze past its ttl
        with pytest.raises(LeaseLost) as refused:
            stale.commit_starts([(job.id, "n1", (0,))], version, 1032.0)
        assert "generation 2" in str(refused.value)
        assert fresh.get(job.id).state.value == "PENDING"  # nothing written
        (started,) = fresh.commit_starts([(job.id, "n1", (0,))], version, 1033.0)
        assert started.state.value == "RUNNING"
    finally:
        stale.close()
        fresh.close()


def test_a_released_lease_fences_its_own_daemons_commits(store: Store) -> None:
    """After a clean stop's release another daemon may take over at once: no start after it."""
    from gpupool.store import LeaseLost

    held = store.acquire_lease(HERE, now=1000.0)
    job = store.submit(spec(), "alice", 1000.0)
    store.release_lease(held, now=1001.0)
    with pytest.raises(LeaseLost):
        start(store, job.id)
    assert store.get(job.id).state.value == "PENDING"
