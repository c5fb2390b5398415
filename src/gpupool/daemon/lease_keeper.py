"""Keeping the database lease while the daemon runs, and scheduling only while it is held.

LeaseKeeper renews the lease (store/lease.py) every ttl/6 in its own thread. The daemon may
schedule while its last successful renewal is younger than two thirds of the ttl: another
daemon can take the lease over only once a full ttl has passed without a renewal (by its own
clock), so the margin covers a renewal that is slow, and clocks that disagree by less than a
third of the ttl. When a renewal finds the lease taken over (its generation is gone), the
keeper calls `on_lost` once, with the lease as it now stands; the daemon stops.

LeasedEngine is the Engine that does nothing to jobs while the keeper says no (it still
takes in what the API posts, so `queue` stays current): a daemon frozen past its ttl
(SIGSTOP, a suspended VM) wakes up without scheduling, and learns at its next renewal
whether it still holds the lease.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from gpupool.core.backends import Backend, BackendAdmission
from gpupool.core.engine_observer import EngineObserver
from gpupool.core.execution import Executor
from gpupool.core.hardware import Inventory
from gpupool.core.units import format_duration
from gpupool.engine.contracts import EngineStore
from gpupool.engine.loop import Engine
from gpupool.engine.pacing import Arrivals
from gpupool.policy.snapshot import PolicyConfig
from gpupool.store import Lease

log = logging.getLogger("gpupool.daemon")


class LeaseStore(Protocol):
    """What the keeper needs of the Store (store/lease.py)."""

    def lease(self) -> Lease | None: ...
    def renew_lease(self, held: Lease, now: float) -> bool: ...
    def release_lease(self, held: Lease, now: float) -> None: ...


class LeaseKeeper:
    def __init__(
        self,
        store: LeaseStore,
        lease: Lease,
        on_lost: Callable[[Lease | None], None],
        *,
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.lease = lease
        self.on_lost = on_lost
        self.heartbeat_s = lease.ttl_s / 6
        self.valid_for_s = lease.ttl_s * 2 / 3
        self._wall = wall_clock
        self._monotonic = monotonic
        self._renewed_at = monotonic()  # the lease was acquired just now
        self._lost = False
        self._failing_since: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def lost(self) -> bool:
        return self._lost

    def valid(self) -> bool:
        """May the daemon schedule now?"""
        return not self._lost and self._monotonic() - self._renewed_at < self.valid_for_s

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gpupool-lease", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing and, unless it was lost, release the lease (a clean stop)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        if not self._lost:
            try:
                self.store.release_lease(self.lease, self._wall())
            except Exception as exc:  # it expires on its own
                log.warning("could not release the database lease (it expires by itself): %s", exc)

    def _run(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            if not self.renew():
                return

    def renew(self) -> bool:
        """One heartbeat. False once the lease is lost (on_lost has been called)."""
        started = self._monotonic()
        try:
            held = self.store.renew_lease(self.lease, self._wall())
        except Exception as exc:  # the database is unreachable: keep trying
            if self._failing_since is None:
                self._failing_since = started
                log.warning(
                    "cannot renew the database lease (%s); scheduling pauses %s after the "
                    "last renewal until it is renewed",
                    exc,
                    format_duration(self.valid_for_s),
                )
            return True
        if held:
            if self._failing_since is not None:
                log.info(
                    "renewed the database lease again after %s",
                    format_duration(started - self._failing_since),
                )
                self._failing_since = None
            self._renewed_at = started
            return True
        self._lost = True
        try:
            now_held: Lease | None = self.store.lease()
        except Exception:
            now_held = None
        self.on_lost(now_held)
        return False


class LeasedEngine(Engine):
    """An Engine that acts on jobs only while `lease.valid()`."""

    def __init__(
        self,
        store: EngineStore,
        executor: Executor,
        inventory: Inventory,
        *,
        lease: LeaseKeeper,
        poll_interval: float = 0.5,
        config: PolicyConfig | None = None,
        backends: Mapping[str, Backend] | None = None,
        observer: EngineObserver | None = None,
        arrivals: Arrivals | None = None,
        admission: Mapping[str, BackendAdmission] | None = None,
    ) -> None:
        super().__init__(
            store,
            executor,
            inventory,
            poll_interval=poll_interval,
            config=config,
            backends=backends,
            observer=observer,
            arrivals=arrivals,
            admission=admission,
        )
        self.lease = lease
        self._paused = False

    def may_act(self) -> bool:
        if not self.lease.valid():
            if not self._paused:
                log.warning("not scheduling: the database lease is not renewed")
                self._paused = True
            return False
        if self._paused:
            log.info("scheduling again: the database lease is renewed")
            self._paused = False
        return True
