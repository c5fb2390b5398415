"""The database lease: at most one daemon schedules on a database at a time.

The state directory's flock keeps two daemons off one state directory, but two daemons with
different state directories and one `--database-url` would each start every job. So a daemon
holds a lease, one row in the database: who holds it (host, state directory, pid), when it last
renewed it (its heartbeat, wall-clock seconds) and for how long a heartbeat counts (ttl_s).

Rules (acquire_lease):
- no row: no daemon ever held it; take it.
- the row's holder is the same host and state directory: take it over at once. The caller
  must hold that state directory's flock, which proves the previous daemon of this directory
  is dead (a restart after a crash or SIGKILL need not wait for the lease to expire).
- another holder that is live (renewed within the row's ttl_s, not released): LeaseHeld.
- another holder that stopped (released it) or stopped renewing (crashed, frozen, cut off;
  its heartbeat is older than ttl_s): take it over, but only if no job is RUNNING. A running
  job's supervisor lives in that holder's state directory, which this daemon cannot see: it
  would launch the job a second time. Only the daemon of that directory can re-adopt it, so
  LeaseHeld says how many run there. A clean stop leaves jobs running too, so release keeps
  the row (marked released) rather than deleting it.
Every take-over adds one to `generation`: a renewal names the generation it holds, so a
daemon whose lease was taken over learns it at its next renewal (and must stop scheduling).
Until then it might still decide a pass (frozen past its ttl, it wakes mid-pass), so the
generation also fences the commit of starts, as Nomad's plan applier fences on leadership: a
Store that acquired the lease refuses, inside the commit's transaction, to start jobs once
the row holds another generation or was released (LeaseLost, nothing written).

Heartbeats are wall-clock times written by the holder and compared with the reader's clock:
hosts sharing a PostgreSQL database need clocks in agreement well within ttl_s (NTP).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Double, Integer, String, Text, func, select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Mapped, Session, mapped_column

from gpupool.core.job import JobState
from gpupool.store.models import Base, JobRow
from gpupool.store.sessions import SessionMethods
from gpupool.store.stale import LeaseLost

LEASE_ROW_ID = 1  # the table holds at most this one row
DEFAULT_TTL_S = 30.0


class LeaseRow(Base):
    __tablename__ = "daemon_lease"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    generation: Mapped[int] = mapped_column(Integer)
    host: Mapped[str] = mapped_column(String)
    state_dir: Mapped[str] = mapped_column(Text)
    pid: Mapped[int] = mapped_column(Integer)
    acquired_at: Mapped[float] = mapped_column(Double)
    heartbeat_at: Mapped[float] = mapped_column(Double)
    ttl_s: Mapped[float] = mapped_column(Double)
    released_at: Mapped[float | None] = mapped_column(Double)


@dataclass(frozen=True)
class LeaseHolder:
    """A daemon asking for the lease: where it runs and on which state directory."""

    host: str
    state_dir: str
    pid: int


@dataclass(frozen=True)
class Lease:
    """The lease as the database has it."""

    holder: LeaseHolder
    generation: int
    acquired_at: float
    heartbeat_at: float
    ttl_s: float
    released_at: float | None = None  # set by a clean stop

    def age(self, now: float) -> float:
        """Seconds since the holder last renewed it (by the reader's clock)."""
        return now - self.heartbeat_at

    def expired(self, now: float) -> bool:
        return self.age(now) > self.ttl_s

    def live(self, now: float) -> bool:
        """Its holder renewed it within its ttl and has not released it."""
        return self.released_at is None and not self.expired(now)

    def same_place(self, holder: LeaseHolder) -> bool:
        """Held for the same host and state directory as `holder` (whatever the pid)."""
        return (self.holder.host, self.holder.state_dir) == (holder.host, holder.state_dir)


class LeaseHeld(Exception):
    """Another daemon holds the lease: it is live, or (running_jobs > 0) it stopped but jobs
    it started are still RUNNING."""

    def __init__(self, lease: Lease, now: float, running_jobs: int = 0) -> None:
        super().__init__(lease, now, running_jobs)
        self.lease = lease
        self.now = now
        self.running_jobs = running_jobs


class LeaseMethods(SessionMethods):
    """Store methods for the lease (a mixin of Store, which provides the sessions)."""

    # The generation this store acquired: its commits of starts are fenced on it (None: it
    # never acquired the lease, as a tool or a test reading the database).
    _fence_generation: int | None = None

    def check_fence(self, s: Session) -> None:
        """LeaseLost unless the lease this store acquired is still held, read in the caller's
        write transaction (the module docstring)."""
        held = self._fence_generation
        if held is None:
            return
        row = s.get(LeaseRow, LEASE_ROW_ID)
        if row is None or row.generation != held:
            now = "none" if row is None else f"generation {row.generation}"
            raise LeaseLost(f"the lease is no longer this daemon's (generation {held}; {now})")
        if row.released_at is not None:
            raise LeaseLost(f"this daemon released the lease (generation {held})")

    def lease(self) -> Lease | None:
        """The lease as it stands, or None when no daemon holds it."""
        with self._read() as s:
            row = s.get(LeaseRow, LEASE_ROW_ID)
            return None if row is None else _lease(row)

    def acquire_lease(self, holder: LeaseHolder, now: float, ttl_s: float = DEFAULT_TTL_S) -> Lease:
        """Take the lease for `holder` (see the module's rules), or LeaseHeld.

        The caller must hold the flock of `holder.state_dir`."""

        def op(s: Session) -> Lease:
            # FOR UPDATE: on PostgreSQL a concurrent acquirer waits for this one and then
            # reads its row; SQLite serializes writers anyway (BEGIN IMMEDIATE).
            row = s.get(LeaseRow, LEASE_ROW_ID, with_for_update=True)
            if row is None:
                row = LeaseRow(id=LEASE_ROW_ID, generation=0)
                s.add(row)
            else:
                _check(s, _lease(row), holder, now)
            row.generation += 1
            row.host, row.state_dir, row.pid = holder.host, holder.state_dir, holder.pid
            row.acquired_at = row.heartbeat_at = now
            row.ttl_s = ttl_s
            row.released_at = None
            s.flush()
            return _lease(row)

        lease = self._write_once_more_on_conflict(op)
        self._fence_generation = lease.generation
        return lease

    def check_lease(self, holder: LeaseHolder, now: float) -> None:
        """LeaseHeld if acquire_lease would refuse `holder` now; changes nothing (the daemon
        asks before it writes anything, and acquires later)."""
        with self._read() as s:
            row = s.get(LeaseRow, LEASE_ROW_ID)
            if row is not None:
                _check(s, _lease(row), holder, now)

    def renew_lease(self, held: Lease, now: float) -> bool:
        """Record a heartbeat for the lease `held`; False if it is no longer held (another
        daemon took it over, or it was released)."""
        with self._write() as s:
            result = s.execute(
                update(LeaseRow)
                .where(LeaseRow.id == LEASE_ROW_ID, LeaseRow.generation == held.generation)
                .values(heartbeat_at=now)
            )
            return cast("CursorResult[Any]", result).rowcount == 1

    def release_lease(self, held: Lease, now: float) -> None:
        """Give the lease back (a clean stop), unless another daemon has it by now. The row
        stays, so that jobs left running are known to be this holder's."""
        with self._write() as s:
            s.execute(
                update(LeaseRow)
                .where(LeaseRow.id == LEASE_ROW_ID, LeaseRow.generation == held.generation)
                .values(released_at=now)
            )


def _check(s: Session, current: Lease, holder: LeaseHolder, now: float) -> None:
    """The rules of the module's docstring, for a lease some daemon has held."""
    if current.same_place(holder):
        return
    if current.live(now):
        raise LeaseHeld(current, now)
    running = s.scalar(select(func.count()).where(JobRow.state == JobState.RUNNING))
    if running:
        raise LeaseHeld(current, now, int(running))


def _lease(row: LeaseRow) -> Lease:
    return Lease(
        LeaseHolder(row.host, row.state_dir, row.pid),
        row.generation,
        row.acquired_at,
        row.heartbeat_at,
        row.ttl_s,
        row.released_at,
    )
