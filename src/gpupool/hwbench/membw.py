"""`gpupool bench membw`: device memory copy bandwidth.

Measured: `dst.copy_(src)` of a buffer of B bytes on the device, the median time of a copy
over the timed repetitions, and bandwidth = 2 * B / seconds / 1e9 GB/s: a copy reads B bytes
and writes B bytes, and both count (the usual copy bandwidth, as STREAM's Copy and
nvbandwidth's device-local copy count it). That is the figure to set beside the memory
bandwidth a GPU's datasheet gives (`plan catalog`'s memory_bandwidth_gbs); a copy reaches
some 80-90% of it on current GPUs.

On the CPU the same copy runs in host memory at small sizes: a check that the benchmark
runs, and a rough host figure (caches make small copies look fast), never a GPU's.
Check: after the timing, the destination equals the source.
"""

from __future__ import annotations

import argparse
import time
from functools import partial

from gpupool.hwbench.common import (
    MIB,
    add_device_arguments,
    cpu_note,
    device_of,
    machine_of,
    mib_sizes,
    repeats_of,
    seconds_per_call,
)
from gpupool.hwbench.result import BenchResult, Progress, Row

SIZES = {"cuda": (256 * MIB, 1024 * MIB, 4096 * MIB), "cpu": (4 * MIB, 64 * MIB)}
TINY_SIZES = {"cuda": (16 * MIB, 64 * MIB), "cpu": (256 * 1024, 4 * MIB)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_device_arguments(parser)
    parser.add_argument(
        "--sizes-mib",
        type=_sizes,
        default=None,
        metavar="M,M,...",
        help="buffer sizes in MiB; default: 256,1024,4096 on CUDA, 4,64 on the CPU "
        "(--tiny: smaller)",
    )


def run(args: argparse.Namespace, progress: Progress) -> BenchResult:
    import torch

    started = time.time()
    device = device_of(args)
    tiny = bool(getattr(args, "tiny", False))
    sizes: tuple[int, ...] = args.sizes_mib or (TINY_SIZES if tiny else SIZES)[device]
    repeats = repeats_of(args, default=20, tiny=5)
    notes = ["GB/s = 2 x bytes / seconds / 1e9: a copy reads and writes each byte"]
    if device == "cpu":
        notes.append(cpu_note())
    progress.start(len(sizes), "membw")
    rows: list[Row] = []
    intact = True
    for size in sizes:
        src = torch.randn(size // 4, device=device)  # float32: 4 bytes an element
        dst = torch.empty_like(src)
        seconds = seconds_per_call(device, partial(dst.copy_, src), repeats)
        intact = intact and bool(torch.equal(dst, src))
        rows.append(Row({"bytes": size}, {"seconds": seconds, "gbs": 2.0 * size / seconds / 1e9}))
        del src, dst
        progress.advance()
    return BenchResult(
        benchmark="membw",
        machine=machine_of(device),
        started_at=started,
        params={"device": device, "sizes": list(sizes), "repeats": repeats},
        rows=tuple(rows),
        checks={"copy equals source": intact},
        notes=tuple(notes),
    )


def _sizes(text: str) -> tuple[int, ...]:
    return mib_sizes(text, multiple=4)  # float32 buffers: 4 bytes an element
