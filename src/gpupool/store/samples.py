"""GPU samples and each job's GPU use, kept for as long as they are worth their space.

- `gpu_samples`: every sample at full rate, for `Retention.raw_s` (a day);
- `gpu_sample_rollups`: per GPU, one row per minute (kept 30 days) and per hour (a year),
  rolled up from the full-rate samples by `roll_up_samples` (the monitor calls it about
  once a minute; each call rolls up the periods that ended since the last one, so a call
  missed, or a daemon restarted, loses nothing while the full-rate samples are still kept);
- `job_usage`: each job's running totals (core.gpu_usage.JobUsage), and `job_usage_hours`,
  the same per job and hour, which accounting sums over a window. Both are kept for good:
  they are one row per job and hour it ran, not per sample.

Only the daemon that holds the lease samples, so only one writer ever writes these tables;
`record_samples` reads and adds up in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Double,
    ForeignKey,
    Index,
    Integer,
    String,
    delete,
    func,
    insert,
    select,
)
from sqlalchemy.orm import Mapped, Session, mapped_column

from gpupool.core.gpu_usage import (
    HOUR_S,
    UTIL_BINS,
    JobUsage,
    JobUsageDelta,
    JobUsageSummary,
    RolledSample,
    hour_of,
    roll_up,
)
from gpupool.core.monitoring import GpuSample
from gpupool.store.models import Base, JobRow
from gpupool.store.sessions import SessionMethods

DAY_S = 86400.0
PERIODS_S = (60, 3600)  # the rolled-up series, finest first


@dataclass(frozen=True)
class Retention:
    """How long each series is kept, in seconds."""

    raw_s: float = DAY_S
    minute_s: float = 30 * DAY_S
    hour_s: float = 365 * DAY_S

    def of(self, period_s: int) -> float:
        return {0: self.raw_s, 60: self.minute_s, 3600: self.hour_s}[period_s]


class GpuSampleRow(Base):
    __tablename__ = "gpu_samples"
    __table_args__ = (Index("ix_gpu_samples_time", "time"),)

    node: Mapped[str] = mapped_column(String, primary_key=True)
    gpu_index: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    time: Mapped[float] = mapped_column(Double, primary_key=True)
    utilization_pct: Mapped[float | None] = mapped_column(Double)
    memory_used_bytes: Mapped[int | None] = mapped_column(BigInteger)
    memory_total_bytes: Mapped[int] = mapped_column(BigInteger)
    power_w: Mapped[float | None] = mapped_column(Double)
    temperature_c: Mapped[float | None] = mapped_column(Double)
    simulated: Mapped[bool] = mapped_column(Boolean)


class GpuRollupRow(Base):
    __tablename__ = "gpu_sample_rollups"
    __table_args__ = (Index("ix_gpu_sample_rollups_period_s_time", "period_s", "time"),)

    period_s: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    node: Mapped[str] = mapped_column(String, primary_key=True)
    gpu_index: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    time: Mapped[float] = mapped_column(Double, primary_key=True)
    samples: Mapped[int] = mapped_column(Integer)
    utilization_pct: Mapped[float | None] = mapped_column(Double)
    utilization_max_pct: Mapped[float | None] = mapped_column(Double)
    memory_used_bytes: Mapped[int | None] = mapped_column(BigInteger)
    memory_total_bytes: Mapped[int] = mapped_column(BigInteger)
    power_w: Mapped[float | None] = mapped_column(Double)
    temperature_c: Mapped[float | None] = mapped_column(Double)
    simulated: Mapped[bool] = mapped_column(Boolean)


class JobUsageRow(Base):
    __tablename__ = "job_usage"

    job_id: Mapped[int] = mapped_column(
        ForeignKey("jobs.id"), primary_key=True, autoincrement=False
    )
    samples: Mapped[int] = mapped_column(Integer)
    utilization_sum: Mapped[float] = mapped_column(Double)
    utilization_bins: Mapped[list[int]] = mapped_column(JSON)
    utilization_max_pct: Mapped[float | None] = mapped_column(Double)
    peak_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    energy_j: Mapped[float] = mapped_column(Double)
    used_gpu_s: Mapped[float] = mapped_column(Double)
    sampled_gpu_s: Mapped[float] = mapped_column(Double)
    simulated: Mapped[bool] = mapped_column(Boolean)


class JobUsageHourRow(Base):
    __tablename__ = "job_usage_hours"

    job_id: Mapped[int] = mapped_column(
        ForeignKey("jobs.id"), primary_key=True, autoincrement=False
    )
    hour: Mapped[float] = mapped_column(Double, primary_key=True, index=True)
    used_gpu_s: Mapped[float] = mapped_column(Double)
    sampled_gpu_s: Mapped[float] = mapped_column(Double)
    energy_j: Mapped[float] = mapped_column(Double)


@dataclass(frozen=True)
class WindowUsage:
    """What one job used in the whole hours that overlap a window (accounting's raw
    material), from its job-hour rows."""

    job_id: int
    first_hour: float
    used_gpu_s: float
    sampled_gpu_s: float
    energy_j: float


class SampleMethods(SessionMethods):
    def record_samples(self, samples: Sequence[GpuSample], deltas: Sequence[JobUsageDelta]) -> None:
        """One sample round: the samples, and what each job used in it, in one transaction."""
        with self._write() as s:
            if samples:
                s.execute(insert(GpuSampleRow), [_sample_values(x) for x in samples])
            if deltas:
                _add_usage(s, deltas)

    def roll_up_samples(self, now: float, retention: Retention = Retention()) -> int:
        """Roll the full-rate samples of every period that ended before `now` into their
        1-minute and 1-hour rows (once each), then forget what is past its retention.
        Returns the rows written."""
        written = 0
        with self._write() as s:
            for period in PERIODS_S:
                done = s.scalar(
                    select(func.max(GpuRollupRow.time)).where(GpuRollupRow.period_s == period)
                )
                begin = None if done is None else done + period
                end = (now // period) * period  # periods that ended by now
                rows = _raw(s, begin, end)
                rolled = roll_up(rows, period)
                if rolled:
                    s.execute(insert(GpuRollupRow), [_rollup_values(r) for r in rolled])
                written += len(rolled)
            s.execute(delete(GpuSampleRow).where(GpuSampleRow.time < now - retention.raw_s))
            for period in PERIODS_S:
                s.execute(
                    delete(GpuRollupRow).where(
                        GpuRollupRow.period_s == period,
                        GpuRollupRow.time < now - retention.of(period),
                    )
                )
        return written

    def gpu_history(self, since: float, until: float, period_s: int) -> list[RolledSample]:
        """Each GPU's series over [since, until): full-rate samples (`period_s` 0) or the
        means of `period_s` periods (60, 3600), the most recent ones that are not rolled up
        yet made from the full-rate samples. Ordered by time, node, GPU."""
        with self._read() as s:
            if period_s == 0:
                return [_as_rolled(r) for r in _raw(s, since, until)]
            done = s.scalar(
                select(func.max(GpuRollupRow.time)).where(GpuRollupRow.period_s == period_s)
            )
            stored = s.scalars(
                select(GpuRollupRow)
                .where(
                    GpuRollupRow.period_s == period_s,
                    GpuRollupRow.time >= (since // period_s) * period_s,
                    GpuRollupRow.time < until,
                )
                .order_by(GpuRollupRow.time, GpuRollupRow.node, GpuRollupRow.gpu_index)
            ).all()
            tail_from = since if done is None else max(since, done + period_s)
            tail = roll_up(_raw(s, tail_from, until), period_s)
        return [_rolled(r) for r in stored] + tail

    def job_usage(self, job_ids: Iterable[int]) -> dict[int, JobUsageSummary]:
        """The GPU use of each of these jobs that has been sampled."""
        ids = list(job_ids)
        out: dict[int, JobUsageSummary] = {}
        with self._read() as s:
            for start in range(0, len(ids), 500):
                rows = s.scalars(
                    select(JobUsageRow).where(JobUsageRow.job_id.in_(ids[start : start + 500]))
                )
                out.update((r.job_id, _usage(r).summary()) for r in rows)
        return out

    def usage_in_window(self, since: float, until: float | None = None) -> list[WindowUsage]:
        """What each job used in the hours that overlap [since, until), summed per job in
        the database: a year of job-hours becomes one row per job."""
        window = [JobUsageHourRow.hour > since - 3600.0]
        if until is not None:
            window.append(JobUsageHourRow.hour < until)
        with self._read() as s:
            rows = (
                s.connection()
                .execute(
                    select(
                        JobUsageHourRow.job_id,
                        func.min(JobUsageHourRow.hour),
                        func.sum(JobUsageHourRow.used_gpu_s),
                        func.sum(JobUsageHourRow.sampled_gpu_s),
                        func.sum(JobUsageHourRow.energy_j),
                    )
                    .where(*window)
                    .group_by(JobUsageHourRow.job_id)
                )
                .all()
            )
        return [WindowUsage(*r) for r in rows]


def _raw(s: Session, begin: float | None, end: float) -> list[GpuSample]:
    stmt = select(GpuSampleRow).where(GpuSampleRow.time < end)
    if begin is not None:
        stmt = stmt.where(GpuSampleRow.time >= begin)
    rows = s.scalars(stmt.order_by(GpuSampleRow.time, GpuSampleRow.node, GpuSampleRow.gpu_index))
    return [
        GpuSample(
            r.node,
            r.gpu_index,
            r.time,
            r.utilization_pct,
            r.memory_used_bytes,
            r.memory_total_bytes,
            r.power_w,
            r.temperature_c,
            (),
            r.simulated,
        )
        for r in rows
    ]


def _sample_values(x: GpuSample) -> dict[str, object]:
    return {
        "node": x.node,
        "gpu_index": x.index,
        "time": x.time,
        "utilization_pct": x.utilization_pct,
        "memory_used_bytes": x.memory_used_bytes,
        "memory_total_bytes": x.memory_total_bytes,
        "power_w": x.power_w,
        "temperature_c": x.temperature_c,
        "simulated": x.simulated,
    }


def _rollup_values(r: RolledSample) -> dict[str, object]:
    return {
        "period_s": r.period_s,
        "node": r.node,
        "gpu_index": r.index,
        "time": r.time,
        "samples": r.samples,
        "utilization_pct": r.util_pct,
        "utilization_max_pct": r.util_max_pct,
        "memory_used_bytes": r.memory_used_bytes,
        "memory_total_bytes": r.memory_total_bytes,
        "power_w": r.power_w,
        "temperature_c": r.temperature_c,
        "simulated": r.simulated,
    }


def _rolled(r: GpuRollupRow) -> RolledSample:
    return RolledSample(
        r.period_s,
        r.time,
        r.node,
        r.gpu_index,
        r.samples,
        r.utilization_pct,
        r.utilization_max_pct,
        r.memory_used_bytes,
        r.memory_total_bytes,
        r.power_w,
        r.temperature_c,
        r.simulated,
    )


def _as_rolled(x: GpuSample) -> RolledSample:
    u = x.utilization_pct
    return RolledSample(
        0, x.time, x.node, x.index, 1, u, u, x.memory_used_bytes, x.memory_total_bytes,
        x.power_w, x.temperature_c, x.simulated,
    )  # fmt: skip


def _usage(r: JobUsageRow) -> JobUsage:
    bins = list(r.utilization_bins)
    bins = (bins + [0] * UTIL_BINS)[:UTIL_BINS]
    return JobUsage(
        r.samples,
        r.utilization_sum,
        bins,
        r.peak_memory_bytes,
        r.energy_j,
        r.used_gpu_s,
        r.sampled_gpu_s,
        r.simulated,
        r.utilization_max_pct,
    )


def _add_usage(s: Session, deltas: Sequence[JobUsageDelta]) -> None:
    """Adds each delta to its job's totals and to its job-hour row (read, add, write)."""
    ids = sorted({d.job_id for d in deltas})
    rows = {r.job_id: r for r in s.scalars(select(JobUsageRow).where(JobUsageRow.job_id.in_(ids)))}
    hour_rows = {
        (r.job_id, r.hour): r
        for r in s.scalars(
            select(JobUsageHourRow).where(
                JobUsageHourRow.job_id.in_(ids),
                JobUsageHourRow.hour.in_(sorted({d.hour for d in deltas})),
            )
        )
    }
    for d in deltas:
        row = rows.get(d.job_id)
        usage = _usage(row) if row is not None else JobUsage()
        usage.add(d)
        if row is None:
            row = rows[d.job_id] = JobUsageRow(job_id=d.job_id)
            s.add(row)
        row.samples = usage.samples
        row.utilization_sum = usage.util_sum
        row.utilization_bins = list(usage.util_bins)
        row.utilization_max_pct = usage.util_max
        row.peak_memory_bytes = usage.peak_memory_bytes
        row.energy_j = usage.energy_j
        row.used_gpu_s = usage.used_gpu_s
        row.sampled_gpu_s = usage.sampled_gpu_s
        row.simulated = usage.simulated
        hour_row = hour_rows.get((d.job_id, d.hour))
        if hour_row is None:
            hour_row = JobUsageHourRow(
                job_id=d.job_id, hour=d.hour, used_gpu_s=0.0, sampled_gpu_s=0.0, energy_j=0.0
            )
            s.add(hour_row)
            hour_rows[(d.job_id, d.hour)] = hour_row
        hour_row.used_gpu_s += d.used_gpu_s
        hour_row.sampled_gpu_s += d.sampled_gpu_s
        hour_row.energy_j += d.energy_j


def add_engine_gpu_use(s: Session, row: JobRow, end: float, utilization: float) -> None:
    """A backend's run that ended [row.start_time, end) on `row.gpus`, whose GPUs its engine
    measured `utilization` (0..1) busy on average (core/execution.py ExitRecord): added to
    the job's usage and its job-hour rows as the pool's samples are, one piece per hour it
    touched, so `gpupool usage` reads it as it reads the pool's own GPUs' use."""
    start = row.start_time
    gpus = len(row.gpus or ())
    if start is None or end <= start or gpus == 0:
        return
    pieces: list[JobUsageDelta] = []
    at = start
    while at < end:
        until = min(hour_of(at) + HOUR_S, end)
        held = (until - at) * gpus
        pieces.append(
            JobUsageDelta(row.id, at, utilization * 100, utilization * held, held, 0.0, None, False)
        )
        at = until
    _add_usage(s, pieces)
