"""`gpupool bench matmul`: dense matrix-multiply throughput per dtype and size.

Measured: C = A @ B for square n x n matrices, the median time of a call over the timed
repetitions, and TFLOPS = 2 * n^3 / seconds / 1e12 (n^3 multiply-adds, two FLOPs each: the
count cuBLAS benchmarks and vendors' peaks use). dtypes: bf16, fp16 (tensor cores), tf32
(fp32 tensors with `torch.backends.cuda.matmul.allow_tf32` on: fp32 inputs rounded to tf32
inside the tensor cores) and fp32 (that flag off: plain fp32). On the CPU only fp32 and bf16
run; tf32 is a GPU mode and fp16 is emulated on most CPUs, so both are skipped with a note.

Check: for each dtype, one small product is compared with float64's product of the same
inputs (relative Frobenius error under the dtype's tolerance), so a figure comes from a
multiply that computes the right thing.
"""

from __future__ import annotations

import argparse
import time
from functools import partial
from typing import TYPE_CHECKING

from gpupool.hwbench.common import (
    add_device_arguments,
    cpu_note,
    device_of,
    machine_of,
    repeats_of,
    seconds_per_call,
)
from gpupool.hwbench.result import BenchResult, Progress, Row

if TYPE_CHECKING:
    import torch

DTYPES = ("bf16", "fp16", "tf32", "fp32")
CPU_DTYPES = ("fp32", "bf16")
SIZES = {"cuda": (2048, 4096, 8192, 16384), "cpu": (256, 512)}
TINY_SIZES = {"cuda": (256, 1024), "cpu": (64, 128)}
CHECK_N = {"cuda": 512, "cpu": 64}
# Relative Frobenius error allowed against float64: each dtype's rounding of the output
# (fp16: 11-bit mantissa, bf16: 8-bit) and of the inputs (tf32: 11-bit), with room to spare.
TOLERANCE = {"fp32": 1e-4, "tf32": 1e-2, "fp16": 1e-2, "bf16": 3e-2}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_device_arguments(parser)
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=None,
        metavar="N,N,...",
        help="matrix sizes n (n x n times n x n); default: 2048,4096,8192,16384 on CUDA, "
        "256,512 on the CPU (--tiny: smaller)",
    )
    parser.add_argument(
        "--dtypes",
        type=_dtypes,
        default=None,
        metavar="D,D,...",
        help=f"of {', '.join(DTYPES)} (default: all on CUDA; fp32, bf16 on the CPU)",
    )


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(w) for w in text.split(",") if w.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes are whole numbers, got {text!r}") from None
    if not sizes or any(n < 1 or n > 65536 for n in sizes):
        raise argparse.ArgumentTypeError(f"each size from 1 to 65536, got {text!r}")
    return sizes


def _dtypes(text: str) -> tuple[str, ...]:
    found = tuple(w.strip().lower() for w in text.split(",") if w.strip())
    bad = [d for d in found if d not in DTYPES]
    if not found or bad:
        raise argparse.ArgumentTypeError(f"dtypes are {', '.join(DTYPES)}; got {text!r}")
    return found


def run(args: argparse.Namespace, progress: Progress) -> BenchResult:
    import torch  # noqa: F811  (the module's name is only a type above)

    started = time.time()
    device = device_of(args)
    tiny = bool(getattr(args, "tiny", False))
    sizes: tuple[int, ...] = args.sizes or (TINY_SIZES if tiny else SIZES)[device]
    asked: tuple[str, ...] = args.dtypes or (DTYPES if device == "cuda" else CPU_DTYPES)
    notes: list[str] = []
    dtypes = asked
    if device == "cpu":
        dtypes = tuple(d for d in asked if d in CPU_DTYPES)
        skipped = [d for d in asked if d not in CPU_DTYPES]
        if skipped:
            notes.append(
                f"skipped on the CPU: {', '.join(skipped)} (tf32 is a GPU tensor-core mode; "
                "fp16 matmul is emulated on most CPUs)"
            )
        notes.append(cpu_note())
    repeats = repeats_of(args, default=10, tiny=3)
    progress.start(len(dtypes) * (len(sizes) + 1), "matmul")
    rows: list[Row] = []
    checks: dict[str, bool] = {}
    torch.manual_seed(0)
    for dtype in dtypes:
        with _precision(dtype):
            checks[f"{dtype} matches float64"] = _close(dtype, device, CHECK_N[device])
            progress.advance()
            for n in sizes:
                a = torch.randn(n, n, device=device, dtype=_torch_dtype(dtype))
                b = torch.randn(n, n, device=device, dtype=_torch_dtype(dtype))
                seconds = seconds_per_call(device, partial(torch.matmul, a, b), repeats)
                rows.append(
                    Row(
                        {"dtype": dtype, "n": n},
                        {"seconds": seconds, "tflops": _tflops(n, seconds)},
                    )
                )
                del a, b
                progress.advance()
    return BenchResult(
        benchmark="matmul",
        machine=machine_of(device),
        started_at=started,
        params={"device": device, "sizes": list(sizes), "dtypes": list(dtypes), "repeats": repeats},
        rows=tuple(rows),
        checks=checks,
        notes=tuple(notes),
    )


def _tflops(n: int, seconds: float) -> float:
    return 2.0 * n**3 / seconds / 1e12


def _torch_dtype(dtype: str) -> torch.dtype:
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype, torch.float32)


class _precision:
    """tf32 on for "tf32", off for everything else; the setting before is put back."""

    def __init__(self, dtype: str) -> None:
        self.tf32 = dtype == "tf32"
        self.before = False

    def __enter__(self) -> None:
        import torch

        self.before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = self.tf32

    def __exit__(self, *exc: object) -> None:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = self.before


def _close(dtype: str, device: str, n: int) -> bool:
    """Whether an n x n product in `dtype` on `device` is within TOLERANCE of float64's
    product of the same (already rounded) inputs."""
    import torch

    a = torch.randn(n, n, device=device).to(_torch_dtype(dtype))
    b = torch.randn(n, n, device=device).to(_torch_dtype(dtype))
    got = torch.matmul(a, b).double().cpu()
    want = torch.matmul(a.double().cpu(), b.double().cpu())
    error = float(torch.linalg.norm(got - want) / torch.linalg.norm(want))
    return error == error and error < TOLERANCE[dtype]  # NaN is never close
