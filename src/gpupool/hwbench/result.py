"""A benchmark's result as data: what was measured, on what, when (issue 17).

A result is rows of measurements, each a set of labels (what was varied: dtype, size, GPU
pair, message bytes) and values (what was measured: seconds, TFLOPS, GB/s, algbw, busbw),
plus checks that must hold (an all-reduce's sum is right), and the machine it ran on. The
same shape is the JSON file a run writes, what the store keeps, and what `bench compare`
reads; rendering is the CLI's. Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from gpupool.core.json_types import JsonObject, JsonValue

FORMAT = 1  # the JSON layout's version; a reader refuses a newer one by name

Label = str | int | float
LabelMap = Mapping[str, Label]


@dataclass(frozen=True)
class Machine:
    """Where it ran: `device` is "cuda" or "cpu" (CI's runs at tiny sizes)."""

    hostname: str
    device: str
    gpu_model: str | None = None  # NVML/torch's name, e.g. "NVIDIA H100 80GB HBM3"
    gpu_count: int = 0
    driver: str | None = None
    cuda: str | None = None
    torch: str | None = None
    cpu_model: str | None = None


@dataclass(frozen=True)
class Row:
    labels: LabelMap  # what was varied, e.g. {"dtype": "bf16", "n": 8192}
    values: Mapping[str, float]  # what was measured, e.g. {"seconds": 0.0012, "tflops": 712.0}


@dataclass(frozen=True)
class BenchResult:
    benchmark: str  # its registry name: "matmul", "allreduce", ...
    machine: Machine
    started_at: float  # epoch seconds
    params: Mapping[str, JsonValue]  # the options it ran with
    rows: tuple[Row, ...]
    checks: Mapping[str, bool] = field(default_factory=dict)  # e.g. {"sum correct": True}
    notes: tuple[str, ...] = ()  # what a reader must know (e.g. "device: cpu, tiny sizes")

    @property
    def passed(self) -> bool:
        return all(self.checks.values())

    def to_json(self) -> JsonObject:
        return {
            "format": FORMAT,
            "benchmark": self.benchmark,
            "machine": dict(vars(self.machine)),
            "started_at": self.started_at,
            "params": dict(self.params),
            "rows": [{"labels": dict(r.labels), "values": dict(r.values)} for r in self.rows],
            "checks": dict(self.checks),
            "notes": list(self.notes),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> BenchResult:
        """The result a `to_json` wrote; ValueError naming what is wrong otherwise."""
        version = data.get("format")
        if version != FORMAT:
            raise ValueError(
                f"format: this gpupool reads benchmark results of format {FORMAT}, not {version!r}"
            )
        try:
            machine = _mapping(data["machine"], "machine")
            rows = []
            for i, raw in enumerate(_list(data["rows"], "rows")):
                row = _mapping(raw, f"rows[{i}]")
                labels = _mapping(row["labels"], f"rows[{i}].labels")
                values = _mapping(row["values"], f"rows[{i}].values")
                rows.append(
                    Row(
                        {str(k): _label(v, f"rows[{i}].labels.{k}") for k, v in labels.items()},
                        {str(k): float(v) for k, v in values.items()},  # type: ignore[arg-type]
                    )
                )
            return cls(
                benchmark=str(data["benchmark"]),
                machine=Machine(**{str(k): v for k, v in machine.items()}),  # type: ignore[arg-type]
                started_at=float(data["started_at"]),  # type: ignore[arg-type]
                params=dict(_mapping(data.get("params") or {}, "params")),  # type: ignore[arg-type]
                rows=tuple(rows),
                checks={
                    str(k): bool(v) for k, v in _mapping(data.get("checks") or {}, "checks").items()
                },
                notes=tuple(str(n) for n in _list(data.get("notes") or [], "notes")),
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"not a benchmark result: {e!r}") from None


def _mapping(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: an object expected, got {type(value).__name__}")
    return value


def _list(value: object, where: str) -> list[object]:
    if not isinstance(value, list):
        raise ValueError(f"{where}: a list expected, got {type(value).__name__}")
    return value


def _label(value: object, where: str) -> Label:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{where}: a string or number expected, got {value!r}")
    return value


class Progress(Protocol):
    """What a benchmark tells while it runs (the CLI draws a bar; tests count ticks)."""

    def start(self, total: int, what: str) -> None: ...

    def advance(self, steps: int = 1) -> None: ...
