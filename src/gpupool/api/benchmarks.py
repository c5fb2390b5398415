"""/v1/benchmarks: hardware benchmark results (`gpupool bench`, docs/hwbench.md).

Any caller the server identified may save a result (core/access.py, `SAVE_BENCHMARK`): it is
stored under the caller's name, never a name the body gives. The body is a result's JSON
(gpupool.hwbench.result), read with `BenchResult.from_json` and kept as that reading
writes it back (finite figures only), so the store holds only results `bench compare` can
read; at most MAX_RESULT_BYTES of it (413), on
top of the daemon's body limit. Everyone may read results, as everyone sees the GPUs: they
carry figures and a host name, never a command or an environment.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Body, Path, Query
from fastapi.responses import JSONResponse

from gpupool.api.checks import MAX_INT64, invalid_field
from gpupool.api.identity import Access, CallerDep
from gpupool.api.openapi import refusals
from gpupool.core.access import Action
from gpupool.core.benchmarks import MAX_RESULT_BYTES, SavedBenchmark
from gpupool.core.wire_shapes import BenchmarkListWire, SavedBenchmarkWire
from gpupool.hwbench.registry import BENCHMARKS
from gpupool.hwbench.result import BenchResult
from gpupool.service.store_contracts import BenchmarkStore

MAX_LIST = 500
MAX_TEXT = 256  # host names, GPU models, drivers: what a machine could call itself


def saved_to_wire(saved: SavedBenchmark) -> SavedBenchmarkWire:
    result: dict[str, object] = dict(saved.result)
    return {
        "id": saved.id,
        "user": saved.user,
        "benchmark": saved.benchmark,
        "hostname": saved.hostname,
        "device": saved.device,
        "gpu_model": saved.gpu_model,
        "gpu_count": saved.gpu_count,
        "driver": saved.driver,
        "started_at": saved.started_at,
        "saved_at": saved.saved_at,
        "passed": saved.passed,
        "result": result,
    }


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status)


def add_benchmark_routes(api: APIRouter, store: BenchmarkStore, access: Access) -> None:
    @api.post("/v1/benchmarks", status_code=201, response_model=None, responses=refusals(403))
    def save_benchmark(
        caller: CallerDep, body: dict[str, Any] = Body(...)
    ) -> SavedBenchmarkWire | JSONResponse:
        """Keep a benchmark result (a `gpupool bench` result's JSON) under the caller's name."""
        access.require(caller, Action.SAVE_BENCHMARK)
        text = json.dumps(body, sort_keys=True)
        if len(text.encode()) > MAX_RESULT_BYTES:
            return _error(
                413,
                "result_too_large",
                f"a benchmark result is at most {MAX_RESULT_BYTES // 1024} KiB of JSON",
            )
        try:
            result = BenchResult.from_json(body)
        except ValueError as exc:
            return invalid_field("result", f"not a benchmark result: {exc}")
        if result.benchmark not in BENCHMARKS:
            known = ", ".join(BENCHMARKS)
            return invalid_field(
                "benchmark", f"benchmark: one of {known}, got {result.benchmark[:70]!r}"
            )
        machine = result.machine
        for name, value in (
            ("hostname", machine.hostname),
            ("device", machine.device),
            ("gpu_model", machine.gpu_model),
            ("driver", machine.driver),
        ):
            if value is not None and not (isinstance(value, str) and len(value) <= MAX_TEXT):
                return invalid_field(
                    f"machine.{name}", f"machine.{name}: text of at most {MAX_TEXT} characters"
                )
        if not isinstance(machine.gpu_count, int) or isinstance(machine.gpu_count, bool):
            return invalid_field("machine.gpu_count", "machine.gpu_count: a whole number")
        kept = result.to_json()  # what from_json read, so every reader can read it again
        try:
            json.dumps(kept, allow_nan=False)
        except ValueError:
            return invalid_field("result", "not a benchmark result: a figure is not finite")
        saved = store.save_benchmark(
            SavedBenchmark(
                id=0,
                user=caller.name,
                benchmark=result.benchmark,
                hostname=machine.hostname,
                device=machine.device,
                gpu_model=machine.gpu_model,
                gpu_count=machine.gpu_count,
                driver=machine.driver,
                started_at=result.started_at,
                saved_at=access.clock.now(),
                passed=result.passed,
                result=kept,
            )
        )
        return saved_to_wire(saved)

    @api.get("/v1/benchmarks")
    def list_benchmarks(
        benchmark: str | None = Query(None, max_length=64),
        gpu_model: str | None = Query(None, max_length=MAX_TEXT),
        limit: int = Query(50, ge=1, le=MAX_LIST),
    ) -> BenchmarkListWire:
        """The newest results first: of `benchmark`, on GPUs `gpu_model` names (as a job's
        GPU type is matched: "H100" finds "NVIDIA H100 80GB HBM3")."""
        found = store.benchmark_results(benchmark, gpu_model, limit)
        return {"results": [saved_to_wire(s) for s in found]}

    @api.get("/v1/benchmarks/{result_id}", response_model=None, responses=refusals(404))
    def get_benchmark(
        result_id: int = Path(ge=1, le=MAX_INT64, description="a saved result's id"),
    ) -> SavedBenchmarkWire | JSONResponse:
        found = store.benchmark_result(result_id)
        if found is None:
            return _error(404, "not_found", f"no benchmark result with id {result_id}")
        return saved_to_wire(found)
