"""`gpupool bench p2p`: GPU-to-GPU copy bandwidth and latency for every ordered pair, P2P on
and off, as seed 001's peering benchmark (CUDA's p2pBandwidthLatencyTest sample) shows them.

For each pair (src, dst), src != dst, and each mode:
- **on**: a direct device-to-device copy (``dst.copy_(src)``: cudaMemcpyAsync between the
  devices; torch enables peer access first when `torch.cuda.can_device_access_peer` says the
  pair can, and without it the driver stages the copy itself, as the CUDA sample notes:
  such rows say ``peer_access: no``);
- **off**: what a program pays without P2P: the data staged through pinned host memory, a
  blocking device-to-host copy then a host-to-device copy.

Values: unidirectional bandwidth (GB/s, 10^9 bytes a second) of `--bytes` copied `--repeat`
times, and latency (us) of one `--latency-bytes` copy averaged over `--latency-repeat`
back-to-back copies (host timer, devices synchronized at both ends, so a copy's launch cost
is in it, as a program sees it). Each row's check: the destination holds exactly the source
bytes (a seeded random pattern) after the copies.

Without GPUs (CI) the run is a stand-in, said in its notes: two host buffers play devices 0
and 1, "on" one memcpy, "off" two through a third buffer; the numbers are host memory
copies, positive and checked, not a GPU link. With one GPU there is no pair: a note, no rows.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpupool.core.json_types import JsonValue
from gpupool.hwbench.result import BenchResult, Progress, Row

if TYPE_CHECKING:
    import torch

NAME = "p2p"
GB = 1e9
MIB = 1 << 20
CUDA_BYTES, CPU_BYTES, TINY_BYTES = 256 * MIB, 64 * MIB, MIB
REPEAT, TINY_REPEAT = 10, 3  # the CUDA sample copies 10 times
LATENCY_REPEAT, TINY_LATENCY_REPEAT = 1000, 20
WARMUP = 2
CPU_STAND_IN = "cpu stand-in: no GPUs; devices 0 and 1 are two host buffers"


class Mode:
    ON = "on"
    OFF = "off"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        choices=("auto", "cuda", "cpu"),
        default="auto",
        help="cuda when a GPU is visible, else the cpu stand-in [auto]",
    )
    parser.add_argument(
        "--devices", default=None, help="GPU indexes to pair, e.g. 0,1,3 [every visible GPU]"
    )
    parser.add_argument(
        "--bytes",
        type=int,
        default=None,
        help=f"bandwidth copy size [{CUDA_BYTES} on cuda, {CPU_BYTES} on the cpu]",
    )
    parser.add_argument("--latency-bytes", type=int, default=4, help="latency copy size [4]")
    parser.add_argument("--repeat", type=int, default=None, help=f"timed copies [{REPEAT}]")
    parser.add_argument(
        "--latency-repeat", type=int, default=None, help=f"timed tiny copies [{LATENCY_REPEAT}]"
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help=f"CI's preset: {TINY_BYTES} B, {TINY_REPEAT} copies, {TINY_LATENCY_REPEAT} tiny",
    )


@dataclass(frozen=True)
class Plan:
    device: str  # "cuda" or "cpu"
    devices: tuple[int, ...]
    nbytes: int
    latency_bytes: int
    repeat: int
    latency_repeat: int

    def params(self) -> dict[str, JsonValue]:
        return {
            "device": self.device,
            "devices": list(self.devices),
            "bytes": self.nbytes,
            "latency_bytes": self.latency_bytes,
            "repeat": self.repeat,
            "latency_repeat": self.latency_repeat,
            "warmup": WARMUP,
        }

    def pairs(self) -> list[tuple[int, int]]:
        return [(s, d) for s in self.devices for d in self.devices if s != d]


def plan(args: argparse.Namespace, gpu_count: int) -> Plan:
    device = args.device if args.device != "auto" else ("cuda" if gpu_count else "cpu")
    if device == "cuda" and not gpu_count:
        raise ValueError("--device cuda: torch sees no CUDA GPU here")
    if device == "cpu":
        devices: tuple[int, ...] = (0, 1)
    elif args.devices:
        try:
            devices = tuple(int(d) for d in str(args.devices).split(","))
        except ValueError:
            raise ValueError(f"--devices: GPU indexes like 0,1,3, got {args.devices!r}") from None
        bad = [d for d in devices if not 0 <= d < gpu_count]
        if bad or len(set(devices)) != len(devices):
            raise ValueError(f"--devices: distinct indexes below {gpu_count}, got {args.devices}")
    else:
        devices = tuple(range(gpu_count))
    top = CUDA_BYTES if device == "cuda" else CPU_BYTES
    nbytes = args.bytes if args.bytes is not None else (TINY_BYTES if args.tiny else top)
    repeat = args.repeat if args.repeat is not None else (TINY_REPEAT if args.tiny else REPEAT)
    lat = args.latency_repeat
    lat = lat if lat is not None else (TINY_LATENCY_REPEAT if args.tiny else LATENCY_REPEAT)
    if nbytes < 1 or args.latency_bytes < 1 or repeat < 1 or lat < 1:
        raise ValueError("--bytes, --latency-bytes, --repeat, --latency-repeat: at least 1")
    return Plan(device, devices, nbytes, int(args.latency_bytes), repeat, lat)


def run(args: argparse.Namespace, progress: Progress) -> BenchResult:
    import torch

    from gpupool.hwbench.machine import torch_machine

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    chosen = plan(args, gpus)
    started_at = time.time()
    notes: list[str] = []
    if chosen.device == "cpu":
        notes.append(f"{CPU_STAND_IN}: host memory copies, not a GPU link")
    elif len(chosen.devices) < 2:
        notes.append(f"one GPU ({chosen.devices}): no pair to measure")
    else:
        notes.append("off: staged through pinned host memory (two blocking copies)")
    rows: list[Row] = []
    checks: dict[str, bool] = {}
    pairs = chosen.pairs()
    progress.start(len(pairs) * 2, "GPU pairs x P2P on/off")
    for src, dst in pairs:
        for mode in (Mode.ON, Mode.OFF):
            row, intact = _measure_pair(chosen, src, dst, mode)
            rows.append(row)
            checks[f"data intact {src}->{dst} p2p {mode}"] = intact
            progress.advance(1)
    if any(r.labels["peer_access"] == "no" for r in rows):
        notes.append("peer_access no: P2P on falls back to a copy the driver stages")
    return BenchResult(
        benchmark=NAME,
        machine=torch_machine(chosen.device),
        started_at=started_at,
        params=chosen.params(),
        rows=tuple(rows),
        checks=checks,
        notes=tuple(notes),
    )


def _measure_pair(chosen: Plan, src: int, dst: int, mode: str) -> tuple[Row, bool]:
    import torch

    cuda = chosen.device == "cuda"
    if cuda:
        peer = "yes" if torch.cuda.can_device_access_peer(src, dst) else "no"
        where_src, where_dst = torch.device("cuda", src), torch.device("cuda", dst)
    else:
        peer, where_src, where_dst = "n/a", torch.device("cpu"), torch.device("cpu")

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(where_src)
            torch.cuda.synchronize(where_dst)

    def timed(nbytes: int, repeat: int) -> tuple[float, bool]:
        g = torch.Generator().manual_seed(nbytes * 1000 + src * 10 + dst)
        pattern = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=g)
        a = pattern.to(where_src)
        b = torch.zeros(nbytes, dtype=torch.uint8, device=where_dst)
        copy = _copier(a, b, mode, cuda)
        for _ in range(WARMUP):
            copy()
        sync()
        t0 = time.perf_counter()
        for _ in range(repeat):
            copy()
        sync()
        seconds = (time.perf_counter() - t0) / repeat
        return seconds, bool(torch.equal(b.cpu(), pattern))

    bw_s, bw_ok = timed(chosen.nbytes, chosen.repeat)
    lat_s, lat_ok = timed(chosen.latency_bytes, chosen.latency_repeat)
    row = Row(
        labels={"src": src, "dst": dst, "p2p": mode, "peer_access": peer},
        values={"bandwidth_gbs": chosen.nbytes / bw_s / GB, "latency_us": lat_s * 1e6},
    )
    return row, bw_ok and lat_ok


def _copier(a: torch.Tensor, b: torch.Tensor, mode: str, cuda: bool) -> Callable[[], None]:
    """One copy of `a` into `b` the way `mode` says (module docstring)."""
    import torch

    if mode == Mode.ON:

        def direct() -> None:
            b.copy_(a, non_blocking=cuda)

        return direct
    # Staged: blocking copies, so the host buffer is never read before it is whole nor
    # overwritten while the next device still reads it.
    host = torch.empty(a.shape, dtype=a.dtype, pin_memory=cuda)

    def staged() -> None:
        host.copy_(a)
        b.copy_(host)

    return staged
