"""`gpupool bench storage PATH`: can this dataset directory feed the GPUs?

Reads every file under PATH (up to `--max-gb`), in two kinds: many small files (under
`--large-mb`: an image dataset's JPEGs, each a file open and a metadata lookup) and few large
ones (shards, TFRecords, tarballs: streaming), each kind twice:

- cold: first each file's cached pages are dropped with posix_fadvise(POSIX_FADV_DONTNEED),
  which needs no root. It drops only clean pages of this host's page cache: a network
  filesystem's server-side cache stays warm, and on tmpfs/ramfs the page cache *is* the
  file, so no read there can be cold (the result says so, and which filesystem it was);
- warm: the same files again, now cached if they fit in memory.

`--generate` writes a synthetic dataset of both kinds into a fresh temp directory under PATH
(fsynced, so its pages are clean and can be dropped), measures it and removes it.

The result compares the read rate with the feed rate the GPUs need, samples/s x bytes per
sample: given as `--samples-per-s`, or from the plan (gpupool.plan.scaling's
compute_ms_from_flops: `--gpu` from the catalog, `--gpus`, `--flops-per-sample`, `--mfu`),
with a verdict row per kind and pass: storage keeps up, or is the bottleneck by a factor
(Run:AI's warning that storage, not the GPU, often limits training). Standard library only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpupool.hwbench.machine import host_machine
from gpupool.hwbench.result import BenchResult, Label, Progress, Row
from gpupool.plan.catalog import load_catalog
from gpupool.plan.scaling import compute_ms_from_flops

NAME = "storage"
NEEDS_TORCH = False  # standard library only: `bench storage --gpus N` needs no PyTorch
MB = 1e6
MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs", "devtmpfs", "hugetlbfs"})


@dataclass(frozen=True)
class Sizes:
    small_files: int
    small_bytes: int
    large_files: int
    large_bytes: int


FULL = Sizes(small_files=2000, small_bytes=100_000, large_files=4, large_bytes=256_000_000)
TINY = Sizes(small_files=60, small_bytes=8_000, large_files=2, large_bytes=2_000_000)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="the dataset directory (or, with --generate, where to write one)")
    p.add_argument(
        "--generate",
        action="store_true",
        help="write a synthetic dataset of small and large files under PATH, measure, remove it",
    )
    p.add_argument("--tiny", action="store_true", help="CI: a tiny generated dataset")
    p.add_argument("--small-files", type=int, help=f"generated small files ({FULL.small_files})")
    p.add_argument("--small-kb", type=float, help=f"their size ({FULL.small_bytes / 1e3:g} kB)")
    p.add_argument("--large-files", type=int, help=f"generated large files ({FULL.large_files})")
    p.add_argument("--large-mb", type=float, default=8.0, help="large from this size, MB (8)")
    p.add_argument(
        "--large-size-mb", type=float, help=f"generated large size ({FULL.large_bytes / MB:g} MB)"
    )
    p.add_argument("--max-gb", type=float, default=8.0, help="read at most this much per kind")
    p.add_argument("--block-kb", type=int, default=1024, help="read size (1024 kB)")
    feed = p.add_argument_group(
        "the feed rate the GPUs need: --samples-per-s, or --gpu/--gpus/--flops-per-sample"
    )
    feed.add_argument("--bytes-per-sample", type=float, help="bytes one training sample reads")
    feed.add_argument("--samples-per-s", type=float, help="samples/s the GPUs consume")
    feed.add_argument("--gpu", help="a catalog GPU, to derive samples/s from FLOPs")
    feed.add_argument("--gpu-count", type=int, default=1, help="how many of them (1)")
    feed.add_argument("--flops-per-sample", type=float, help="training FLOPs per sample")
    feed.add_argument("--mfu", type=float, default=0.4, help="model FLOPs utilization (0.4)")
    feed.add_argument("--precision", default="bf16", choices=["bf16", "fp16", "fp32"])


@dataclass(frozen=True)
class Feed:
    bytes_per_s: float
    samples_per_s: float
    origin: str


def feed_rate(args: argparse.Namespace) -> Feed | None:
    """What the GPUs need, or None when not enough was given (the verdict is then unknown)."""
    if args.bytes_per_sample is None:
        return None
    if not args.bytes_per_sample > 0:
        raise ValueError(f"--bytes-per-sample must be positive, got {args.bytes_per_sample:g}")
    if args.samples_per_s is not None:
        if args.gpu is not None:
            raise ValueError("--samples-per-s: give either it or --gpu with --flops-per-sample")
        if not args.samples_per_s > 0:
            raise ValueError(f"--samples-per-s must be positive, got {args.samples_per_s:g}")
        rate, origin = args.samples_per_s, "--samples-per-s"
    elif args.gpu is not None and args.flops_per_sample is not None:
        gpu = load_catalog().gpu(args.gpu)
        peak = gpu.peak_tflops(args.precision)
        ms = compute_ms_from_flops(args.flops_per_sample, 1, peak, args.mfu)
        rate = args.gpu_count * 1e3 / ms
        origin = (
            f"{args.gpu_count} x {gpu.name} at {peak:g} TFLOPS {args.precision} x MFU {args.mfu:g} "
            f"/ {args.flops_per_sample:.3g} FLOPs per sample (plan)"
        )
    else:
        return None
    return Feed(rate * args.bytes_per_sample, rate, origin)


def filesystem_of(path: Path) -> str:
    """The type of the filesystem holding `path` (the longest mount point above it)."""
    best, kind = "", "unknown"
    try:
        mounts = Path("/proc/mounts").read_text(encoding="utf-8").splitlines()
    except OSError:
        return kind
    resolved = str(path.resolve())
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = resolved == point or resolved.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def generate(root: Path, sizes: Sizes) -> Path:
    """A fresh directory under `root` with small/ and large/ files of random bytes, fsynced
    (dirty pages cannot be dropped, so an unsynced file could never be read cold)."""
    top = Path(tempfile.mkdtemp(prefix="gpupool-storage-", dir=root))
    block = os.urandom(1 << 20)
    for kind, count, size in (
        ("small", sizes.small_files, sizes.small_bytes),
        ("large", sizes.large_files, sizes.large_bytes),
    ):
        (top / kind).mkdir()
        for i in range(count):
            with open(top / kind / f"{i:06d}.bin", "wb") as f:
                left = size
                while left > 0:
                    left -= f.write(block[: min(left, len(block))])
                f.flush()
                os.fsync(f.fileno())
    return top


def dataset_files(root: Path) -> Iterator[Path]:
    for dirpath, _dirs, names in os.walk(root):
        for name in sorted(names):
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                yield path


def split_kinds(
    files: Sequence[tuple[Path, int]], large_from: float, max_bytes: float
) -> dict[str, list[tuple[Path, int]]]:
    """small / large by size, each capped at `max_bytes` (in walk order)."""
    kinds: dict[str, list[tuple[Path, int]]] = {"small": [], "large": []}
    taken = {"small": 0, "large": 0}
    for path, size in files:
        kind = "large" if size >= large_from else "small"
        if taken[kind] + size <= max_bytes or not kinds[kind]:
            kinds[kind].append((path, size))
            taken[kind] += size
    return {k: v for k, v in kinds.items() if v}


def drop_cache(files: Sequence[tuple[Path, int]]) -> bool:
    """posix_fadvise(DONTNEED) on each file; False where the call is not offered."""
    if not hasattr(os, "posix_fadvise"):
        return False
    for path, _ in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return True


def read_all(
    files: Sequence[tuple[Path, int]], block: int, progress: Progress
) -> tuple[int, float]:
    """Read every file to its end: (bytes read, seconds)."""
    buf = bytearray(block)
    view = memoryview(buf)
    total = 0
    start = time.perf_counter()
    for path, _ in files:
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(view):
                total += n
        progress.advance()
    return total, time.perf_counter() - start


def _sizes(args: argparse.Namespace) -> Sizes:
    base = TINY if args.tiny else FULL
    return Sizes(
        small_files=args.small_files if args.small_files is not None else base.small_files,
        small_bytes=int(args.small_kb * 1e3) if args.small_kb is not None else base.small_bytes,
        large_files=args.large_files if args.large_files is not None else base.large_files,
        large_bytes=int(args.large_size_mb * MB)
        if args.large_size_mb is not None
        else base.large_bytes,
    )


def verdict(have_bytes_per_s: float, feed: Feed | None) -> tuple[str, dict[str, float]]:
    """("keeps up" | "bottleneck" | "unknown", values): have / need, and need / have."""
    if feed is None:
        return "unknown", {}
    ratio = have_bytes_per_s / feed.bytes_per_s
    values = {"need_mb_s": feed.bytes_per_s / MB, "headroom": ratio}
    if ratio >= 1:
        return "keeps up", values
    return "bottleneck", values | {"short_by": 1 / ratio}


def run(args: argparse.Namespace, progress: Progress) -> BenchResult:
    started = time.time()
    root = Path(args.path)
    if not root.is_dir():
        raise ValueError(f"{args.path}: not a directory")
    feed = feed_rate(args)  # refuses bad flags before anything is written
    sizes = _sizes(args)
    generated = generate(root, sizes) if (args.generate or args.tiny) else None
    try:
        where = generated or root
        files = [(p, p.stat().st_size) for p in dataset_files(where)]
        if generated is not None:  # its kinds are its folders, whatever the sizes chosen
            kinds = {
                kind: [(p, n) for p, n in files if p.parent.name == kind]
                for kind in ("small", "large")
            }
            kinds = {k: v for k, v in kinds.items() if v}
        else:
            kinds = split_kinds(files, args.large_mb * MB, args.max_gb * 1e9)
        fs = filesystem_of(where)
        can_drop = fs not in MEMORY_FILESYSTEMS and hasattr(os, "posix_fadvise")
        progress.start(2 * sum(len(v) for v in kinds.values()), f"{NAME}: {where}")
        rows: list[Row] = []
        complete = True
        for kind, chosen in kinds.items():
            expected = sum(size for _, size in chosen)
            for pass_ in ("cold", "warm"):
                if pass_ == "cold":
                    drop_cache(chosen)
                got, seconds = read_all(chosen, args.block_kb * 1024, progress)
                complete = complete and got == expected
                mb_s = got / seconds / MB if seconds > 0 else 0.0
                labels: dict[str, Label] = {"table": "read", "kind": kind, "pass": pass_}
                values = {
                    "files": float(len(chosen)),
                    "mb": got / MB,
                    "seconds": seconds,
                    "mb_s": mb_s,
                    "files_s": len(chosen) / seconds if seconds > 0 else 0.0,
                    "mean_file_kb": expected / len(chosen) / 1e3,
                }
                if pass_ == "cold" and not can_drop:
                    labels["pass"] = "cold (not possible)"
                rows.append(Row(labels, values))
                said, vs = verdict(mb_s * MB, feed)
                rows.append(
                    Row(
                        {"table": "verdict", "kind": kind, "pass": str(labels["pass"]),
                         "verdict": said},
                        vs | {"have_mb_s": mb_s},
                    )
                )  # fmt: skip
    finally:
        if generated is not None:
            shutil.rmtree(generated, ignore_errors=True)
    notes = [f"filesystem: {fs}; read in {args.block_kb} kB blocks, one file after another"]
    if not can_drop:
        notes.append(
            f"cold reads were not possible: {fs} keeps files in memory"
            if fs in MEMORY_FILESYSTEMS
            else "cold reads were not possible: os.posix_fadvise is not offered here"
        )
    else:
        notes.append(
            "cold: posix_fadvise(DONTNEED) dropped this host's cached pages first; a network "
            "filesystem's server cache may still serve them"
        )
    if feed is None:
        notes.append(
            "no verdict: give --bytes-per-sample with --samples-per-s (or --gpu, --gpus, "
            "--flops-per-sample) for the feed rate the GPUs need"
        )
    else:
        notes.append(
            f"the GPUs need {feed.samples_per_s:,.4g} samples/s x {args.bytes_per_sample:,.0f} "
            f"B = {feed.bytes_per_s / MB:,.4g} MB/s ({feed.origin})"
        )
    read_rows = [r for r in rows if r.labels["table"] == "read"]
    return BenchResult(
        benchmark=NAME,
        machine=host_machine(),
        started_at=started,
        params={
            "path": str(root),
            "generated": generated is not None,
            "filesystem": fs,
            "small_files": sizes.small_files if generated else None,
            "small_bytes": sizes.small_bytes if generated else None,
            "large_files": sizes.large_files if generated else None,
            "large_bytes": sizes.large_bytes if generated else None,
            "large_from_mb": args.large_mb,
            "max_gb": args.max_gb,
            "block_kb": args.block_kb,
            "bytes_per_sample": args.bytes_per_sample,
            "samples_per_s": None if feed is None else feed.samples_per_s,
            "tiny": bool(args.tiny),
        },
        rows=tuple(rows),
        checks={
            "files found": bool(read_rows),
            "every byte read": complete,
            "throughput positive": bool(read_rows)
            and all(r.values["mb_s"] > 0 and r.values["files_s"] > 0 for r in read_rows),
        },
        notes=tuple(notes),
    )
