"""What the benchmark modules share: the `--device`/`--tiny` options, the machine a result
names, and timing that means the same on CUDA and on the CPU.

torch is imported inside these functions, which only a benchmark's `run` calls (torch is
then loaded already), so this module loads with the CLI at no cost. Timing on CUDA uses events recorded on the stream around
the timed repetitions, after warm-up and a synchronize (kernel launches are asynchronous: a
host clock would time the launches, not the work); on the CPU the host's perf_counter.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Protocol, cast

from gpupool.hwbench.machine import torch_machine as machine_of

__all__ = ["machine_of"]  # the one probe (machine.py), named as the benchmarks call it

DEVICES = ("auto", "cpu", "cuda")


def add_device_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default="auto",
        help="where to run: cuda (the first visible GPU), cpu, or auto (cuda when torch "
        "sees one; default)",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="tiny sizes and few repetitions (CI, or a quick check that it runs)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        metavar="N",
        help="timed repetitions per measure (default: the benchmark's; the median is kept)",
    )


def device_of(args: argparse.Namespace) -> str:
    """ "cuda" or "cpu" as asked; `auto` is cuda when torch sees a GPU. ValueError when cuda
    is asked for and there is none (the CLI says it in one line)."""
    import torch

    asked = str(getattr(args, "device", "auto"))
    has_cuda = torch.cuda.is_available()
    if asked == "cuda" and not has_cuda:
        raise ValueError("--device cuda: torch sees no CUDA GPU here (use --device cpu)")
    if asked == "auto":
        return "cuda" if has_cuda else "cpu"
    return asked


MIB = 1 << 20
MAX_MIB = 65536


def mib_sizes(text: str, multiple: int = 1) -> tuple[int, ...]:
    """Byte sizes from `--sizes-mib` ("1,16,256"), each rounded down to a whole `multiple`
    of bytes (a float32 buffer: 4) and at least one; argparse's error naming the problem."""
    try:
        mib = tuple(float(w) for w in text.split(",") if w.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes are numbers of MiB, got {text!r}") from None
    if not mib or any(not 0 < m <= MAX_MIB for m in mib):
        raise argparse.ArgumentTypeError(
            f"each size more than 0 and at most {MAX_MIB} MiB: {text!r}"
        )
    return tuple(max(int(m * MIB) // multiple * multiple, multiple) for m in mib)


def repeats_of(args: argparse.Namespace, default: int, tiny: int) -> int:
    given = getattr(args, "repeats", None)
    if given is not None:
        if given < 1:
            raise ValueError(f"--repeats: at least 1, got {given}")
        return int(given)
    return tiny if getattr(args, "tiny", False) else default


def seconds_per_call(device: str, fn: Callable[[], object], repeats: int, warmup: int = 3) -> float:
    """The median seconds one call of `fn` takes, over `repeats` timed calls after `warmup`
    untimed ones. On CUDA each call is timed between two events on the current stream and
    read after a synchronize; on the CPU with perf_counter."""
    import torch

    for _ in range(warmup):
        fn()
    times: list[float] = []
    if device == "cuda":
        # its __init__ is untyped: seen through the Protocol of what is used here
        new_event = cast("Callable[..., _Event]", torch.cuda.Event)
        torch.cuda.synchronize()
        for _ in range(repeats):
            start = new_event(enable_timing=True)
            end = new_event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)  # ms -> s
    else:
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return max(statistics.median(times), 1e-9)  # a clock's tick, never zero: no inf rates


class _Event(Protocol):
    """What timing uses of a torch.cuda.Event."""

    def record(self) -> None: ...

    def synchronize(self) -> None: ...

    def elapsed_time(self, end: _Event) -> float: ...


def cpu_note() -> str:
    return (
        "device: cpu (no GPU here, or --device cpu): host figures at small sizes, a check "
        "that the benchmark runs; no % of a GPU's peak applies"
    )
