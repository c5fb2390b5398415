"""A result's throughput figures as a share of the catalog's peak (`gpupool bench compare`).

Which figure a measure is set against (plan/catalog.py, decimal units on both sides):
- matmul `tflops` of dtype bf16, fp16, fp32: `GpuSpec.peak_tflops(dtype)` (dense peaks);
  tf32 has no catalog figure;
- membw `gbs`: `memory_bandwidth_gbs` (the datasheet's; a copy reaches some 80-90% of it);
- pcie `gbs` (h2d, d2h): the usable bandwidth per direction of the catalog's
  `pcie<gen>-x16` interconnect, from the GPU's `pcie_gen`;
- anything else: no catalog figure (said, not guessed).
A CPU run gets no percentage: the catalog's peaks are GPUs'. The result's GPU model (as
torch/NVML names it) is matched to a catalog entry with core's `model_matches`, the most
specific of the names that match winning ("NVIDIA H100 PCIe" is the H100-PCIe, not the
H100-SXM whose alias "H100" also matches).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpupool.core.gpu_catalog import model_matches
from gpupool.hwbench.result import BenchResult, Row
from gpupool.plan.catalog import Catalog, GpuSpec, name_key

# The measure of each benchmark that is a throughput, and its unit.
THROUGHPUT: dict[str, tuple[str, str]] = {
    "matmul": ("tflops", "TFLOPS"),
    "membw": ("gbs", "GB/s"),
    "pcie": ("gbs", "GB/s"),
}


@dataclass(frozen=True)
class Figure:
    """One row's throughput beside the catalog's: `percent` None when there is nothing to
    compare with, and `why` says what is missing."""

    row: Row
    measure: str  # the value's key: "tflops", "gbs"
    value: float
    unit: str
    peak: float | None
    why: str = ""

    @property
    def percent(self) -> float | None:
        return None if self.peak is None else 100.0 * self.value / self.peak


def catalog_gpu(catalog: Catalog, model: str | None) -> GpuSpec | None:
    """The catalog entry `model` is, by core's model matching; the most specific name wins."""
    if not model:
        return None
    best: tuple[int, GpuSpec] | None = None
    for gpu in catalog.gpus:
        for name in (gpu.name, *gpu.aliases):
            if model_matches(name, model) and (best is None or len(name_key(name)) > best[0]):
                best = (len(name_key(name)), gpu)
    return None if best is None else best[1]


def figures(result: BenchResult, catalog: Catalog) -> list[Figure]:
    """Each row's throughput and the peak it is set against (rows without a throughput
    measure, e.g. an all-reduce's latency rows, are left out)."""
    known = THROUGHPUT.get(result.benchmark)
    if known is None:
        return []
    measure, unit = known
    gpu = catalog_gpu(catalog, result.machine.gpu_model)
    found = []
    for row in result.rows:
        if measure not in row.values:
            continue
        peak, why = _peak(result, gpu, catalog, row)
        found.append(Figure(row, measure, row.values[measure], unit, peak, why))
    return found


def _peak(
    result: BenchResult, gpu: GpuSpec | None, catalog: Catalog, row: Row
) -> tuple[float | None, str]:
    if result.machine.device != "cuda":
        return None, "a CPU run: the catalog's peaks are GPUs'"
    if gpu is None:
        return None, f"GPU {result.machine.gpu_model or '?'} is not in the catalog"
    if result.benchmark == "matmul":
        dtype = str(row.labels.get("dtype", ""))
        if dtype in ("bf16", "fp16", "fp32"):
            return gpu.peak_tflops(dtype), ""
        return None, f"no catalog figure for {dtype or 'this dtype'}"
    if result.benchmark == "membw":
        return gpu.memory_bandwidth_gbs, ""
    if result.benchmark == "pcie":
        link = f"pcie{gpu.pcie_gen}-x16"
        for entry in catalog.interconnects:
            if name_key(entry.name) == name_key(link):
                return entry.bandwidth_gbs, ""
        return None, f"no catalog figure for {link}"
    return None, f"no catalog figure for {result.benchmark}"
