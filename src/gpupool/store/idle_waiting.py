"""GPU-seconds idle while a job that could use them waited, by cause (policy/idle_waiting.py
says the rule; engine/idle_waiting.py counts them), kept per hour so that a daemon restart
loses nothing and `gpupool usage` can report a window.

`idle_waiting`: one row per (hour, cause), the hour's start (seconds since the epoch, a
multiple of 3600) and the GPU-seconds counted inside that hour. The engine adds what it
counted in batches (about once a minute and when the daemon stops: `add_idle_waiting`),
never on every pass. Kept for good: at most 4 rows an hour, 35,000 a year.

Only the daemon that holds the lease runs passes, so only one writer adds to these rows;
`add_idle_waiting` reads and adds up in one transaction all the same.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import ColumnElement, Double, String, func, select
from sqlalchemy.orm import Mapped, mapped_column

from gpupool.store.models import Base
from gpupool.store.sessions import SessionMethods

HOUR_S = 3600.0

# GPU-seconds by (hour's start, cause): what `add_idle_waiting` adds.
HourCauseSeconds = Mapping[tuple[float, str], float]


class IdleWaitingRow(Base):
    __tablename__ = "idle_waiting"

    hour: Mapped[float] = mapped_column(Double, primary_key=True)
    cause: Mapped[str] = mapped_column(String, primary_key=True)
    gpu_seconds: Mapped[float] = mapped_column(Double)


def hour_of(t: float) -> float:
    """The start of the hour `t` falls in."""
    return (t // HOUR_S) * HOUR_S


def hour_in_window(hour: float, since: float, until: float | None) -> bool:
    """Whether the hour starting at `hour` overlaps [since, until): the hours a window
    counts (whole hours, as the used GPU-hours of store/samples.py are)."""
    return hour > since - HOUR_S and (until is None or hour < until)


class IdleWaitingMethods(SessionMethods):
    def add_idle_waiting(self, amounts: HourCauseSeconds) -> None:
        """Add GPU-seconds to their (hour, cause) rows, made where missing, in one
        transaction. Each hour must be an hour's start (`hour_of`)."""
        due = {key: s for key, s in amounts.items() if s > 0}
        if not due:
            return
        with self._write() as s:
            hours = sorted({hour for hour, _ in due})
            rows = {
                (r.hour, r.cause): r
                for r in s.scalars(select(IdleWaitingRow).where(IdleWaitingRow.hour.in_(hours)))
            }
            for (hour, cause), gpu_s in sorted(due.items()):
                row = rows.get((hour, cause))
                if row is None:
                    s.add(IdleWaitingRow(hour=hour, cause=cause, gpu_seconds=gpu_s))
                else:
                    row.gpu_seconds += gpu_s

    def idle_waiting_in_window(self, since: float, until: float | None = None) -> dict[str, float]:
        """GPU-seconds by cause in the hours that overlap [since, until) (`hour_in_window`:
        whole hours, so the window's first hour counts whole). Causes with none are left
        out."""
        where: list[ColumnElement[bool]] = [IdleWaitingRow.hour > since - HOUR_S]
        if until is not None:
            where.append(IdleWaitingRow.hour < until)
        return self._idle_waiting_sums(where)

    def idle_waiting_totals(self) -> dict[str, float]:
        """GPU-seconds by cause over everything kept: where the daemon's counter starts."""
        return self._idle_waiting_sums([])

    def _idle_waiting_sums(self, where: list[ColumnElement[bool]]) -> dict[str, float]:
        stmt = select(IdleWaitingRow.cause, func.sum(IdleWaitingRow.gpu_seconds)).group_by(
            IdleWaitingRow.cause
        )
        if where:
            stmt = stmt.where(*where)
        with self._read() as s:
            rows = s.connection().execute(stmt).all()
        return {cause: float(total) for cause, total in rows}
