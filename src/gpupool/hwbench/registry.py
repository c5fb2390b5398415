"""The benchmarks `gpupool bench` offers, by name -> module (imported only when chosen)."""

from __future__ import annotations

BENCHMARKS: dict[str, str] = {
    "matmul": "gpupool.hwbench.matmul",  # TFLOPS per dtype and size
    "membw": "gpupool.hwbench.membw",  # device memory copy bandwidth
    "pcie": "gpupool.hwbench.pcie",  # host<->device, pinned and pageable
    "p2p": "gpupool.hwbench.p2p",  # GPU<->GPU bandwidth/latency matrix, P2P on and off
    "allreduce": "gpupool.hwbench.allreduce",  # torch.distributed, algbw/busbw as nccl-tests
    "ddp-sweep": "gpupool.hwbench.ddp_sweep",  # seed 004's DP vs DDP sweep
    "storage": "gpupool.hwbench.storage",  # dataset read throughput vs the GPUs' feed rate
}
