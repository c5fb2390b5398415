"""A benchmark result as the pool keeps it (issue 17; docs/hwbench.md): who saved it, when,
the machine and GPU it ran on, whether its checks held, and the result's JSON as the
client sent it (format: gpupool.hwbench.result, read back with its `from_json`)."""

from __future__ import annotations

from dataclasses import dataclass

from gpupool.core.json_types import JsonObject

MAX_RESULT_BYTES = 256 * 1024  # a result is rows of figures: a sweep fits in a few KiB


@dataclass(frozen=True)
class SavedBenchmark:
    id: int
    user: str  # who saved it (the caller the API established)
    benchmark: str  # its registry name: "matmul", ...
    hostname: str
    device: str  # "cuda" or "cpu"
    gpu_model: str | None
    gpu_count: int
    driver: str | None
    started_at: float  # when it ran (epoch seconds)
    saved_at: float
    passed: bool  # every check held
    result: JsonObject  # the whole result's JSON
