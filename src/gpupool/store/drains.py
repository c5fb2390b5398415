"""Drained GPUs (core/drain.py), one row per GPU, kept until resumed.

`drained_gpus`: (node, gpu) the key, the admin's reason, who and when. Draining a GPU that is
drained already keeps its first time and takes the new reason (as `scontrol update ...
reason=` does); resuming one that is not drained changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Double, Integer, String, select
from sqlalchemy.orm import Mapped, mapped_column

from gpupool.core.drain import DrainedGpu
from gpupool.store.models import Base
from gpupool.store.sessions import SessionMethods


class DrainedGpuRow(Base):
    __tablename__ = "drained_gpus"

    node: Mapped[str] = mapped_column(String, primary_key=True)
    gpu: Mapped[int] = mapped_column(Integer, primary_key=True)
    reason: Mapped[str] = mapped_column(String)
    by: Mapped[str] = mapped_column(String)
    since: Mapped[float] = mapped_column(Double)


def _drained(r: DrainedGpuRow) -> DrainedGpu:
    return DrainedGpu(r.node, r.gpu, r.reason, r.by, r.since)


class DrainMethods(SessionMethods):
    def drain_gpus(
        self, gpus: Iterable[tuple[str, int]], reason: str, by: str, at: float
    ) -> list[DrainedGpu]:
        """Drain each (node, gpu) in one transaction; the drains as kept, in key order."""
        wanted = sorted(set(gpus))
        with self._write() as s:
            rows = {(r.node, r.gpu): r for r in s.scalars(select(DrainedGpuRow))}
            out = []
            for node, gpu in wanted:
                row = rows.get((node, gpu))
                if row is None:
                    row = DrainedGpuRow(node=node, gpu=gpu, reason=reason, by=by, since=at)
                    s.add(row)
                else:
                    row.reason, row.by = reason, by
                out.append(DrainedGpu(node, gpu, reason, by, row.since))
            return out

    def resume_gpus(self, gpus: Iterable[tuple[str, int]]) -> list[DrainedGpu]:
        """Resume each (node, gpu) in one transaction; the drains that were there."""
        wanted = set(gpus)
        with self._write() as s:
            gone = [r for r in s.scalars(select(DrainedGpuRow)) if (r.node, r.gpu) in wanted]
            out = [_drained(r) for r in gone]
            for r in gone:
                s.delete(r)
            return sorted(out, key=lambda d: d.key)

    def drained_gpus(self) -> list[DrainedGpu]:
        """Every drained GPU, in (node, gpu) order."""
        with self._read() as s:
            rows = s.scalars(select(DrainedGpuRow).order_by(DrainedGpuRow.node, DrainedGpuRow.gpu))
            return [_drained(r) for r in rows]
