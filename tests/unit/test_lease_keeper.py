"""Keeping the database lease (daemon/lease_keeper.py): renewals, the window in which the
daemon may schedule, and losing the lease to another daemon. A real store, fake clocks."""

from __future__ import annotations

from pathlib import Path

from gpupool.daemon.lease_keeper import LeaseKeeper, LeaseStore
from gpupool.store import Lease, LeaseHolder, Store

HERE = LeaseHolder("box", "/var/lib/gpupool", 1)
OTHER = LeaseHolder("box", "/srv/pool", 2)


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class Unreachable:
    """A store whose database does not answer."""

    def lease(self) -> Lease | None:
        raise ConnectionError("connection refused")

    def renew_lease(self, held: Lease, now: float) -> bool:
        raise ConnectionError("connection refused")

    def release_lease(self, held: Lease, now: float) -> None:
        raise ConnectionError("connection refused")


def keeper_on(
    store: LeaseStore, lease: Lease, lost: list[Lease | None]
) -> tuple[LeaseKeeper, Clock, Clock]:
    wall, mono = Clock(lease.heartbeat_at), Clock(100.0)
    return LeaseKeeper(store, lease, lost.append, wall_clock=wall, monotonic=mono), wall, mono


def test_renewals_keep_the_daemon_scheduling(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        lease = store.acquire_lease(HERE, now=1000.0, ttl_s=30)
        lost: list[Lease | None] = []
        keeper, wall, mono = keeper_on(store, lease, lost)
        assert keeper.heartbeat_s == 5 and keeper.valid_for_s == 20
        assert keeper.valid()
        mono.t += 19.9
        assert keeper.valid()
        mono.t += 0.2  # 20.1 s without a renewal: another daemon may soon take it
        assert not keeper.valid()
        wall.t += 20.1
        assert keeper.renew() and keeper.valid()
        current = store.lease()
        assert current is not None and current.heartbeat_at == 1020.1
        assert lost == []
    finally:
        store.close()


def test_a_lease_taken_over_is_lost_once_and_not_released(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        lease = store.acquire_lease(HERE, now=1000.0, ttl_s=30)
        lost: list[Lease | None] = []
        keeper, wall, mono = keeper_on(store, lease, lost)
        taken = store.acquire_lease(OTHER, now=1031.0)  # this daemon was frozen
        wall.t, mono.t = 1032.0, 132.0
        assert not keeper.renew()
        assert lost == [taken] and keeper.lost and not keeper.valid()
        keeper.stop()  # a lost lease is not released: it is the other daemon's
        assert store.lease() == taken
    finally:
        store.close()


def test_a_clean_stop_releases_the_lease(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        lease = store.acquire_lease(HERE, now=1000.0, ttl_s=30)
        keeper, wall, _ = keeper_on(store, lease, [])
        wall.t = 1001.0
        keeper.stop()
        released = store.lease()
        assert released is not None and released.released_at == 1001.0
    finally:
        store.close()


def test_an_unreachable_database_pauses_scheduling_but_loses_nothing() -> None:
    lease = Lease(HERE, 1, 1000.0, 1000.0, 30.0)
    lost: list[Lease | None] = []
    keeper, _, mono = keeper_on(Unreachable(), lease, lost)
    mono.t += 25
    assert keeper.renew()  # keep trying
    assert not keeper.valid() and not keeper.lost and lost == []
