"""`gpupool bench pcie`: host-to-device and device-to-host bandwidth, pinned and pageable.

Measured on CUDA: `dst.copy_(src)` of B bytes between a host buffer and the device, in each
direction (h2d, d2h), from pinned (page-locked: the GPU's DMA engine reads it directly, and
the copy is asynchronous) and pageable host memory (the driver stages it through a pinned
buffer of its own: usually slower); the median time over the timed repetitions; bandwidth =
B / seconds / 1e9 GB/s, one direction (each byte crosses the link once). The figure to set
beside it is the link's usable bandwidth per direction (`plan catalog`'s PCIe entries:
PCIe 4.0 x16 about 31.5 GB/s, 5.0 x16 about 63 GB/s); pinned copies reach some 80-90% of it.

On the CPU there is no device and no link: the benchmark measures a host-to-host copy of
pageable memory as a stand-in, so CI sees it run and its check hold, and says so in a note
(its figure is memory bandwidth, not PCIe's; pinning needs a GPU driver).
Check: the data that went over and came back equals what was sent.
"""

from __future__ import annotations

import argparse
import time
from functools import partial

from gpupool.hwbench.common import (
    MIB,
    add_device_arguments,
    device_of,
    machine_of,
    mib_sizes,
    repeats_of,
    seconds_per_call,
)
from gpupool.hwbench.result import BenchResult, Progress, Row

SIZES = {"cuda": (1 * MIB, 16 * MIB, 256 * MIB, 1024 * MIB), "cpu": (1 * MIB, 16 * MIB)}
TINY_SIZES = {"cuda": (1 * MIB, 16 * MIB), "cpu": (256 * 1024, 1 * MIB)}
CPU_NOTE = (
    "device: cpu (no GPU here, or --device cpu): no PCIe link to measure; a host-to-host "
    "copy of pageable memory stands in (its GB/s is host memory's, not a link's)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_device_arguments(parser)
    parser.add_argument(
        "--sizes-mib",
        type=_sizes,
        default=None,
        metavar="M,M,...",
        help="transfer sizes in MiB; default: 1,16,256,1024 on CUDA (--tiny: 1,16)",
    )


def run(args: argparse.Namespace, progress: Progress) -> BenchResult:
    started = time.time()
    device = device_of(args)
    tiny = bool(getattr(args, "tiny", False))
    sizes: tuple[int, ...] = args.sizes_mib or (TINY_SIZES if tiny else SIZES)[device]
    repeats = repeats_of(args, default=20, tiny=5)
    notes = ["GB/s = bytes / seconds / 1e9, one direction"]
    if device == "cuda":
        rows, intact = _over_the_link(sizes, repeats, progress)
    else:
        notes.append(CPU_NOTE)
        rows, intact = _host_stand_in(sizes, repeats, progress)
    return BenchResult(
        benchmark="pcie",
        machine=machine_of(device),
        started_at=started,
        params={"device": device, "sizes": list(sizes), "repeats": repeats},
        rows=tuple(rows),
        checks={"data arrives intact": intact},
        notes=tuple(notes),
    )


def _over_the_link(
    sizes: tuple[int, ...], repeats: int, progress: Progress
) -> tuple[list[Row], bool]:
    import torch

    progress.start(len(sizes) * 4, "pcie")
    rows: list[Row] = []
    intact = True
    for memory in ("pinned", "pageable"):
        pinned = memory == "pinned"
        for size in sizes:
            host = (
                torch.randint(0, 256, (size,), dtype=torch.uint8).pin_memory()
                if pinned
                else (torch.randint(0, 256, (size,), dtype=torch.uint8))
            )
            back = torch.empty_like(host, pin_memory=pinned)
            dev = torch.empty(size, dtype=torch.uint8, device="cuda")
            for direction, dst, src in (("h2d", dev, host), ("d2h", back, dev)):
                seconds = seconds_per_call(
                    "cuda", partial(dst.copy_, src, non_blocking=pinned), repeats
                )
                labels = {"direction": direction, "memory": memory, "bytes": size}
                rows.append(Row(labels, {"seconds": seconds, "gbs": size / seconds / 1e9}))
                progress.advance()
            torch.cuda.synchronize()
            intact = intact and bool(torch.equal(back, host))
            del host, back, dev
    return rows, intact


def _host_stand_in(
    sizes: tuple[int, ...], repeats: int, progress: Progress
) -> tuple[list[Row], bool]:
    import torch

    progress.start(len(sizes), "pcie (host stand-in)")
    rows: list[Row] = []
    intact = True
    for size in sizes:
        src = torch.randint(0, 256, (size,), dtype=torch.uint8)
        dst = torch.empty_like(src)
        seconds = seconds_per_call("cpu", partial(dst.copy_, src), repeats)
        intact = intact and bool(torch.equal(dst, src))
        labels: dict[str, str | int] = {"direction": "host-copy", "memory": "pageable"}
        labels["bytes"] = size
        rows.append(Row(labels, {"seconds": seconds, "gbs": size / seconds / 1e9}))
        progress.advance()
    return rows, intact


def _sizes(text: str) -> tuple[int, ...]:
    return mib_sizes(text, multiple=1)
