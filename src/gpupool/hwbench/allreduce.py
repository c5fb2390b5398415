"""`gpupool bench allreduce`: torch.distributed all-reduce bandwidth, as nccl-tests report it.

For each message size (8 B to 1 GiB, doubling, as ``all_reduce_perf -b 8 -e 1G -f 2``):
the average time of one in-place all-reduce (sum, float32) over `--iters` after `--warmup`,
averaged over the ranks (nccl-tests' default ``-a 1``); algbw = bytes / time and busbw =
algbw x 2(n-1)/n, in GB/s (10^9 bytes), exactly as nccl-tests' doc/PERFORMANCE.md defines
them; and a check that the sum is right (rank r contributes r+1 to every element, so each
element must be n(n+1)/2 on every rank). NCCL on CUDA, gloo on the CPU (CI's `--tiny`).

It runs as a set of ranks (`DISTRIBUTED`):
- in a job started with torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, ...: what
  ``gpupool submit --distributed torchrun`` sets) `run` joins that group; rank 0 returns
  the result, the other ranks a result marked with their rank (`reports_result` says which
  to keep). The job's command is `JOB_ENTRY` (allreduce_job.py), where rank 0 writes the
  JSON file;
- alone, `run` starts `--ranks N` local ranks of `JOB_ENTRY` itself (local_ranks.py) and
  returns rank 0's result.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from gpupool.core.json_types import JsonValue
from gpupool.hwbench.result import BenchResult, Progress, Row

if TYPE_CHECKING:
    import torch

NAME = "allreduce"
DISTRIBUTED = True  # the CLI submits it with --distributed torchrun, one rank per GPU
JOB_ENTRY = "gpupool.hwbench.allreduce_job"  # each rank runs `python -m JOB_ENTRY ARGS`

GB = 1e9  # nccl-tests' GB/s: 10^9 bytes a second
DTYPE_BYTES = 4  # float32, nccl-tests' default type
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
FULL_MAX_BYTES = GIB  # the range: 8 B to 1 GB
CPU_MAX_BYTES = 64 * MIB  # gloo on the CPU: beyond this a run takes minutes and says little
TINY_MAX_BYTES = MIB
WARMUP, ITERS = 5, 20  # nccl-tests' defaults (-w 5 -n 20)
TINY_WARMUP, TINY_ITERS = 2, 5


def bus_factor(ranks: int) -> float:
    """nccl-tests' all-reduce correction: busbw = algbw x 2(n-1)/n (doc/PERFORMANCE.md)."""
    return 2.0 * (ranks - 1) / ranks


def expected_sum(ranks: int) -> float:
    """Each element's sum when rank r contributes r+1: 1 + 2 + ... + n."""
    return ranks * (ranks + 1) / 2.0


def sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """Message sizes from `min_bytes` to `max_bytes`, times `factor` each step; whole
    float32 elements (a size is rounded down to a multiple of 4, at least 4)."""
    if factor < 2:
        raise ValueError(f"--factor: at least 2, got {factor}")
    low = max(DTYPE_BYTES, min_bytes - min_bytes % DTYPE_BYTES)
    if max_bytes < low:
        raise ValueError(f"--max-bytes {max_bytes} is below --min-bytes {low}")
    out = []
    size = low
    while size <= max_bytes:
        out.append(size)
        size *= factor
    return out


def measured_row(size: int, ranks: int, seconds: float) -> Row:
    """One size's row: time per all-reduce (us), algbw and busbw (GB/s), as nccl-tests."""
    algbw = size / seconds / GB
    return Row(
        labels={"bytes": size, "elements": size // DTYPE_BYTES},
        values={
            "time_us": seconds * 1e6,
            "algbw_gbs": algbw,
            "busbw_gbs": algbw * bus_factor(ranks),
        },
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        choices=("auto", "cuda", "cpu"),
        default="auto",
        help="cuda (NCCL) when a GPU is visible, else cpu (gloo) [auto]",
    )
    parser.add_argument(
        "--ranks",
        type=int,
        default=None,
        help="ranks to start when run alone [the visible GPUs, or 2 on the CPU]; "
        "in a --distributed job the job's ranks",
    )
    parser.add_argument("--min-bytes", type=int, default=8, help="smallest message [8]")
    parser.add_argument(
        "--max-bytes",
        type=int,
        default=None,
        help=f"largest message [{FULL_MAX_BYTES} on cuda, {CPU_MAX_BYTES} on the cpu]",
    )
    parser.add_argument("--factor", type=int, choices=(2, 4), default=2, help="size step [2]")
    parser.add_argument("--warmup", type=int, default=None, help=f"warm-up all-reduces [{WARMUP}]")
    parser.add_argument("--iters", type=int, default=None, help=f"timed all-reduces [{ITERS}]")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help=f"CI's preset: 8 B..{TINY_MAX_BYTES} B, {TINY_WARMUP} warm-up, {TINY_ITERS} timed",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds the ranks may take to meet and for each collective [600]",
    )


@dataclass(frozen=True)
class Plan:
    """What one run does, resolved from the options and the device."""

    device: str  # "cuda" or "cpu"
    sizes: tuple[int, ...]
    warmup: int
    iters: int
    timeout_s: float

    def params(self, ranks: int) -> dict[str, JsonValue]:
        return {
            "device": self.device,
            "backend": "nccl" if self.device == "cuda" else "gloo",
            "ranks": ranks,
            "dtype": "float32",
            "op": "sum, in place",
            "min_bytes": self.sizes[0],
            "max_bytes": self.sizes[-1],
            "sizes": len(self.sizes),
            "warmup": self.warmup,
            "iters": self.iters,
        }


def plan(args: argparse.Namespace, cuda_available: bool) -> Plan:
    device = args.device if args.device != "auto" else ("cuda" if cuda_available else "cpu")
    if device == "cuda" and not cuda_available:
        raise ValueError("--device cuda: torch sees no CUDA GPU here")
    if args.tiny:
        top, warmup, iters = TINY_MAX_BYTES, TINY_WARMUP, TINY_ITERS
    else:
        top = FULL_MAX_BYTES if device == "cuda" else CPU_MAX_BYTES
        warmup, iters = WARMUP, ITERS
    max_bytes = args.max_bytes if args.max_bytes is not None else top
    warmup = args.warmup if args.warmup is not None else warmup
    iters = args.iters if args.iters is not None else iters
    if iters < 1 or warmup < 0:
        raise ValueError(f"--iters at least 1 and --warmup at least 0, got {iters}, {warmup}")
    return Plan(device, tuple(sizes(args.min_bytes, max_bytes, args.factor)), warmup, iters,
                float(args.timeout))  # fmt: skip


def job_argv(args: argparse.Namespace) -> list[str]:
    """The options of `args` as JOB_ENTRY's command line (each rank parses them again)."""
    argv = ["--device", args.device, "--min-bytes", str(args.min_bytes)]
    argv += ["--factor", str(args.factor), "--timeout", repr(float(args.timeout))]
    for flag, value in (("--max-bytes", args.max_bytes), ("--warmup", args.warmup),
                        ("--iters", args.iters)):  # fmt: skip
        if value is not None:
            argv += [flag, str(value)]
    return argv + (["--tiny"] if args.tiny else [])


def in_rank_group(env: Mapping[str, str] = os.environ) -> bool:
    """Started as one rank of a group (torchrun's environment), not alone."""
    return all(env.get(k) for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def reports_result(env: Mapping[str, str] = os.environ) -> bool:
    """Whether this process's result is the benchmark's: rank 0, or a run alone."""
    return not in_rank_group(env) or env.get("RANK") == "0"


def run(args: argparse.Namespace, progress: Progress) -> BenchResult:
    import torch

    if in_rank_group():
        return run_rank(args, progress)
    from gpupool.hwbench import local_ranks
    from gpupool.hwbench.allreduce_job import read_result, result_path

    cuda = torch.cuda.is_available()
    chosen = plan(args, cuda)  # refuse bad options here, before starting anything
    n = args.ranks if args.ranks is not None else (
        torch.cuda.device_count() if chosen.device == "cuda" else 2)  # fmt: skip
    if n < 1:
        raise ValueError(f"--ranks: at least 1, got {n}")
    out = result_path()
    try:
        local_ranks.run_ranks(
            JOB_ENTRY,
            [*job_argv(args), "--out", str(out)],
            n,
            progress,
            timeout_s=chosen.timeout_s * 2 + 60,
        )
        return read_result(out)
    finally:
        out.unlink(missing_ok=True)


def run_rank(args: argparse.Namespace, progress: Progress) -> BenchResult:
    """This process's part as one rank of the group its environment names."""
    import torch
    import torch.distributed as dist

    from gpupool.hwbench.machine import torch_machine

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    chosen = plan(args, torch.cuda.is_available())
    if chosen.device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    started_at = time.time()
    dist.init_process_group(
        "nccl" if chosen.device == "cuda" else "gloo",
        timeout=timedelta(seconds=chosen.timeout_s),
    )
    try:
        rows, checks = _measure(chosen, device, rank, world, progress)
    finally:
        dist.destroy_process_group()
    notes = [
        f"{world} ranks, {'NCCL on CUDA' if chosen.device == 'cuda' else 'gloo on the CPU'}; "
        "busbw = algbw x 2(n-1)/n (nccl-tests, doc/PERFORMANCE.md)",
    ]
    if world == 1:
        notes.append("one rank: nothing crosses a link, busbw is 0 by definition")
    if chosen.device == "cpu":
        notes.append("device: cpu (gloo): host memory and loopback, not a GPU interconnect")
    if rank != 0:
        notes.append(f"rank {rank} of {world}: rank 0's result is the benchmark's")
    params = chosen.params(world)
    params["rank"] = rank
    return BenchResult(
        benchmark=NAME,
        machine=torch_machine(chosen.device),
        started_at=started_at,
        params=params,
        rows=tuple(rows),
        checks=checks,
        notes=tuple(notes),
    )


def _measure(
    chosen: Plan, device: torch.device, rank: int, world: int, progress: Progress
) -> tuple[list[Row], dict[str, bool]]:
    import torch
    import torch.distributed as dist

    cuda = chosen.device == "cuda"
    rows: list[Row] = []
    checks: dict[str, bool] = {}
    progress.start(len(chosen.sizes), "all-reduce sizes")
    for size in chosen.sizes:
        count = size // DTYPE_BYTES
        # Timed on zeros: a float sum costs the same whatever the values, and zeros never
        # grow into inf or denormals over the iterations (the CPU would slow down on those).
        buf = torch.zeros(count, dtype=torch.float32, device=device)
        for _ in range(chosen.warmup):
            dist.all_reduce(buf)
        seconds = _timed(buf, chosen.iters, cuda)
        # nccl-tests' default (-a 1): the time averaged over the ranks.
        total = torch.tensor([seconds], dtype=torch.float64, device=device)
        dist.all_reduce(total)
        rows.append(measured_row(size, world, float(total.item()) / world))
        checks[f"sum correct at {size} B"] = _sum_correct(buf, rank, world)
        del buf
        progress.advance(1)
    return rows, checks


def _timed(buf: torch.Tensor, iters: int, cuda: bool) -> float:
    """Seconds per all-reduce of `buf`, on this rank, the ranks started together."""
    import torch
    import torch.distributed as dist

    # As nccl-tests: a host timer around the loop, the device synchronized at both ends.
    dist.barrier()
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf)
    if cuda:
        torch.cuda.synchronize()  # NCCL's work is queued: wait until it is done
    return (time.perf_counter() - t0) / iters


def _sum_correct(buf: torch.Tensor, rank: int, world: int) -> bool:
    """Rank r fills `buf` with r+1; after the all-reduce every element on every rank must be
    n(n+1)/2 (small integers: exact in float32). True only if it holds on all ranks."""
    import torch
    import torch.distributed as dist

    buf.fill_(float(rank + 1))
    dist.all_reduce(buf)
    ok = bool(torch.all(buf == expected_sum(world)).item())
    flag = torch.tensor([1 if ok else 0], dtype=torch.int32, device=buf.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return int(flag.item()) == 1
