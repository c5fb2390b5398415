"""What a pool job runs for `gpupool bench NAME --gpus N`:
`python -m gpupool.hwbench.job NAME --result-file FILE [the benchmark's options]`.

Runs the benchmark on the GPUs the pool gave the job (CUDA_VISIBLE_DEVICES) and writes its
result as JSON to FILE, whole (a temporary file renamed into place), which the waiting CLI
reads after the job ends. In a distributed job (one process per GPU) only rank 0 writes.
Exit status: 0 when the result was written (its checks may still have failed: the result
says which), 2 for bad options or a benchmark that cannot run here (one line on stderr).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gpupool.hwbench.modules import load
from gpupool.hwbench.progress import Bar
from gpupool.hwbench.registry import BENCHMARKS


def write_result(path: Path, text: str) -> None:
    """`text` into `path` whole: a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in BENCHMARKS:
        print(
            f"usage: python -m gpupool.hwbench.job {{{','.join(BENCHMARKS)}}} ...", file=sys.stderr
        )
        return 2
    bench = load(args[0])
    if bench is None:
        print(f"gpupool: benchmark {args[0]} is not available in this gpupool", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(prog=f"gpupool.hwbench.job {bench.name}")
    parser.add_argument("--result-file", type=Path, required=True)
    # `gpupool bench NAME`'s own options (cli/bench/__init__.py OWN_FLAGS, and the pool's): the CLI
    # passes the words after NAME on as they were given, these included; they mean nothing here.
    for flag in ("--gpus", "--out", "--state-dir", "--url"):
        parser.add_argument(flag, help=argparse.SUPPRESS)
    for flag in ("--json", "--no-save"):
        parser.add_argument(flag, action="store_true", help=argparse.SUPPRESS)
    bench.module.add_arguments(parser)
    parsed = parser.parse_args(args[1:])
    try:
        result = bench.module.run(parsed, Bar(sys.stderr))
    except ValueError as exc:
        print(f"gpupool: {bench.name}: {exc}", file=sys.stderr)
        return 2
    if os.environ.get("RANK", "0") == "0":
        write_result(parsed.result_file, result.dumps())
        print(f"result written to {parsed.result_file}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
