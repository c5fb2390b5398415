"""GPU health events as NVML reported them (core/gpu_health.py), kept for `gpupool health`.

`gpu_health_events`: one row per event, the newest KEEP_PER_GPU of each GPU. A GPU that
reports something every few seconds (clock throttling) would otherwise grow the table
without end: each `record_health` deletes, for the GPUs it wrote, their rows past the
newest KEEP_PER_GPU, in the same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Double, Index, Integer, String, delete, insert, select
from sqlalchemy.orm import Mapped, mapped_column

from gpupool.core.gpu_health import Fault, HealthEvent, HealthKind
from gpupool.store.models import Base
from gpupool.store.sessions import SessionMethods

KEEP_PER_GPU = 10_000  # events kept per GPU: at one every 5 s, about 14 hours of them


class GpuHealthRow(Base):
    __tablename__ = "gpu_health_events"
    __table_args__ = (
        Index("ix_gpu_health_events_node_gpu_time", "node", "gpu", "time"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    node: Mapped[str] = mapped_column(String)
    gpu: Mapped[int] = mapped_column(Integer)
    time: Mapped[float] = mapped_column(Double)
    kind: Mapped[str] = mapped_column(String)  # HealthKind's value
    code: Mapped[int | None] = mapped_column(Integer, nullable=True)  # the XID, if one
    detail: Mapped[str] = mapped_column(String)
    fault: Mapped[str] = mapped_column(String)  # Fault's value


def _event(r: GpuHealthRow) -> HealthEvent:
    return HealthEvent(r.node, r.gpu, r.time, HealthKind(r.kind), r.code, r.detail, Fault(r.fault))


class GpuHealthMethods(SessionMethods):
    def record_health(self, events: Sequence[HealthEvent]) -> None:
        """Keep `events` in one transaction (none: nothing is done), and of each GPU they
        are on, only the newest KEEP_PER_GPU rows."""
        if not events:
            return
        rows = [
            {
                "node": e.node,
                "gpu": e.gpu,
                "time": e.time,
                "kind": str(e.kind),
                "code": e.code,
                "detail": e.detail,
                "fault": str(e.fault),
            }
            for e in events
        ]
        t = GpuHealthRow
        with self._write() as s:
            s.execute(insert(t), rows)
            for node, gpu in sorted({e.key for e in events}):
                beyond = (
                    select(t.id)
                    .where(t.node == node, t.gpu == gpu)
                    .order_by(t.time.desc(), t.id.desc())
                    .offset(KEEP_PER_GPU)
                )
                s.execute(delete(t).where(t.id.in_(beyond)))

    def health_events(
        self,
        since: float | None = None,
        limit: int = 1000,
        *,
        gpu: tuple[str, int] | None = None,
    ) -> list[HealthEvent]:
        """The events at `since` or later (None: any), newest first, at most `limit`;
        `gpu`: only that (node, GPU index)'s."""
        t = GpuHealthRow
        query = select(t).order_by(t.time.desc(), t.id.desc()).limit(limit)
        if since is not None:
            query = query.where(t.time >= since)
        if gpu is not None:
            query = query.where(t.node == gpu[0], t.gpu == gpu[1])
        with self._read() as s:
            return [_event(r) for r in s.scalars(query)]
