"""Each rank's command for the all-reduce benchmark: ``python -m gpupool.hwbench.allreduce_job
[allreduce options] --out RESULT.json``.

As a pool job: ``gpupool submit --gpus 4 --distributed torchrun -- python -m
gpupool.hwbench.allreduce_job --out /shared/allreduce.json``; every rank joins the group from
torchrun's environment, rank 0 writes the result (atomically: a reader never sees half a
file), the others write nothing. Run without that environment, it starts its own local ranks
(allreduce.run). It exits 0 when the benchmark ran, whatever its checks say: a wrong sum is
in the result's `checks`, for `bench compare` and the CLI to show, not a crashed job.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from gpupool.hwbench import allreduce, local_ranks
from gpupool.hwbench.result import BenchResult, Progress


class NoProgress:
    def start(self, total: int, what: str) -> None:
        pass

    def advance(self, steps: int = 1) -> None:
        pass


class LogProgress:
    """Rank 0's progress in the job's log when no process waits on a pipe for it."""

    def __init__(self) -> None:
        self.total = 0
        self.done = 0
        self.what = ""

    def start(self, total: int, what: str) -> None:
        self.total, self.done, self.what = total, 0, what
        print(f"allreduce: {total} {what}", flush=True)

    def advance(self, steps: int = 1) -> None:
        self.done += steps
        print(f"allreduce: {self.done}/{self.total} {self.what} done", flush=True)


def result_path() -> Path:
    """A fresh file name for rank 0's result (the file is made empty, then replaced)."""
    fd, name = tempfile.mkstemp(prefix="gpupool-allreduce-", suffix=".json")
    os.close(fd)
    return Path(name)


def write_result(result: BenchResult, out: Path) -> None:
    """`out` holds the whole result or what it held before: written aside, then renamed."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_text(result.dumps() + "\n")
    os.replace(tmp, out)


def read_result(path: Path) -> BenchResult:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise RuntimeError(f"{path}: rank 0 wrote no result: {e}") from None
    return BenchResult.from_json(data)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpupool.hwbench.allreduce_job",
        description="One rank of `gpupool bench allreduce` (rank 0 writes --out).",
    )
    allreduce.add_arguments(parser)
    parser.add_argument("--out", type=Path, required=True, help="where rank 0 writes the JSON")
    args = parser.parse_args(argv)
    reporting = allreduce.reports_result()
    progress: Progress = NoProgress()
    if reporting:
        progress = local_ranks.progress_from_env() or LogProgress()
    try:
        result = allreduce.run(args, progress)
    except (ValueError, local_ranks.RanksFailed) as e:
        print(f"gpupool bench allreduce: {e}", file=sys.stderr)
        return 2
    if reporting:
        write_result(result, args.out)
        for row in result.rows:
            v = row.values
            print(
                f"{row.labels['bytes']:>12} B  {v['time_us']:12.2f} us  "
                f"algbw {v['algbw_gbs']:9.4f} GB/s  busbw {v['busbw_gbs']:9.4f} GB/s",
                flush=True,
            )
        bad = [name for name, ok in result.checks.items() if not ok]
        print(f"checks: {'all passed' if not bad else 'FAILED: ' + ', '.join(bad)}", flush=True)
    return 0


if __name__ == "__main__":
    from gpupool.hwbench.rank_exit import exit_without_finalizing

    exit_without_finalizing(main)
