"""The Store's benchmark results (a mixin of Store, which provides the sessions; migration
0011): one row per saved result, the columns a listing filters and shows, and the result's
JSON whole (core/benchmarks.py). Append-only: a result is a measurement, never edited."""

from __future__ import annotations

import json

from sqlalchemy import Boolean, Double, Index, Integer, String, Text, select
from sqlalchemy.orm import Mapped, mapped_column

from gpupool.core.benchmarks import SavedBenchmark
from gpupool.core.gpu_catalog import model_matches
from gpupool.core.json_types import JsonObject
from gpupool.store.models import Base
from gpupool.store.sessions import SessionMethods

_BATCH = 200  # rows read at a time while a GPU-model filter looks for `limit` matches


class BenchmarkRow(Base):
    __tablename__ = "benchmark_results"
    __table_args__ = (
        Index("ix_benchmark_results_benchmark", "benchmark"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user: Mapped[str] = mapped_column("username", String)
    benchmark: Mapped[str] = mapped_column(String(64))
    hostname: Mapped[str] = mapped_column(String)
    device: Mapped[str] = mapped_column(String(16))
    gpu_model: Mapped[str | None] = mapped_column(String)
    gpu_count: Mapped[int] = mapped_column(Integer)
    driver: Mapped[str | None] = mapped_column(String)
    started_at: Mapped[float] = mapped_column(Double)
    saved_at: Mapped[float] = mapped_column(Double)
    passed: Mapped[bool] = mapped_column(Boolean)
    result: Mapped[str] = mapped_column(Text)


class BenchmarkMethods(SessionMethods):
    def save_benchmark(self, saved: SavedBenchmark) -> SavedBenchmark:
        """Store `saved` (its id is ignored) and return it with the id it got."""
        with self._write() as s:
            row = BenchmarkRow(
                user=saved.user,
                benchmark=saved.benchmark,
                hostname=saved.hostname,
                device=saved.device,
                gpu_model=saved.gpu_model,
                gpu_count=saved.gpu_count,
                driver=saved.driver,
                started_at=saved.started_at,
                saved_at=saved.saved_at,
                passed=saved.passed,
                result=json.dumps(saved.result, sort_keys=True),
            )
            s.add(row)
            s.flush()
            return _saved(row)

    def benchmark_result(self, result_id: int) -> SavedBenchmark | None:
        with self._read() as s:
            row = s.get(BenchmarkRow, result_id)
            return None if row is None else _saved(row)

    def benchmark_results(
        self, benchmark: str | None = None, gpu_model: str | None = None, limit: int = 50
    ) -> list[SavedBenchmark]:
        """The newest `limit` results, newest first: of `benchmark` when given, on a GPU
        that `gpu_model` names when given (core's model matching: "H100" finds "NVIDIA H100
        80GB HBM3"; done here, not in SQL, so it is the scheduler's rule exactly)."""
        stmt = select(BenchmarkRow).order_by(BenchmarkRow.id.desc())
        if benchmark is not None:
            stmt = stmt.where(BenchmarkRow.benchmark == benchmark)
        found: list[SavedBenchmark] = []
        with self._read() as s:
            for row in s.scalars(stmt.execution_options(yield_per=_BATCH)):
                if gpu_model is not None and not (
                    row.gpu_model and model_matches(gpu_model, row.gpu_model)
                ):
                    continue
                found.append(_saved(row))
                if len(found) >= limit:
                    break
        return found


def _saved(row: BenchmarkRow) -> SavedBenchmark:
    result: JsonObject = json.loads(row.result)
    return SavedBenchmark(
        id=row.id,
        user=row.user,
        benchmark=row.benchmark,
        hostname=row.hostname,
        device=row.device,
        gpu_model=row.gpu_model,
        gpu_count=row.gpu_count,
        driver=row.driver,
        started_at=row.started_at,
        saved_at=row.saved_at,
        passed=row.passed,
        result=result,
    )
