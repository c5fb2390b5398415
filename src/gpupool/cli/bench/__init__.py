"""`gpupool bench NAME`: a hardware benchmark on this machine, or as a pool job with
`--gpus N`; its result saved as a JSON file and in the pool's store; `bench compare`.

Runs here by default (the GPUs this process sees; the CPU at tiny sizes when there is
none). With `--gpus N` it is submitted as a job (`python -m gpupool.hwbench.job NAME ...`,
with `--distributed torchrun` for a benchmark that runs one process per GPU), waited for
(its id and queue position on stderr), and the result file the job wrote is read. Either
way the result is written to `--out` (default: a new file under
`$XDG_CACHE_HOME/gpupool/benchmarks/`, the user's own: a shared pool's state directory is
root's) and, unless `--no-save`, sent to the pool (`POST /v1/benchmarks`); when no pool
answers the file is all there is, and the command says so.

Exit: 0 the benchmark ran and its checks held; 1 a check failed, or the job ended without a
result, or no pool answered a `--gpus` run; 2 bad options, no PyTorch (checked before a
`--gpus` job is queued: it would run this interpreter), or a benchmark that cannot run here.
docs/hwbench.md.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path

from gpupool.cli.commands import Offline, Parents, Subparsers
from gpupool.hwbench.registry import BENCHMARKS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpupool.client import Client
    from gpupool.hwbench.modules import Benchmark
    from gpupool.hwbench.result import BenchResult

# Options of `bench NAME` itself; a benchmark module must not define these (hwbench/job.py
# accepts and ignores them, so the words after NAME go to the job unchanged).
OWN_FLAGS = ("--gpus", "--out", "--json", "--no-save")
NO_TORCH = (
    "bench needs PyTorch: pip install 'gpupool[dist]' (a CPU build runs the tiny sizes; "
    "docs/hwbench.md)"
)


def register(sub: Subparsers, parents: Parents) -> None:
    from gpupool.hwbench.modules import load

    p = sub.add_parser(
        "bench",
        help="measure this machine's GPUs (matmul, membw, pcie, ...); compare results",
        description="Hardware benchmarks, run here or as a pool job (--gpus N); each "
        "result is written as JSON and saved in the pool. docs/hwbench.md.",
    )
    names = p.add_subparsers(dest="benchmark", metavar="BENCHMARK", prog="gpupool bench")
    names.required = True
    for name in BENCHMARKS:
        bench = load(name)
        q = names.add_parser(
            name,
            parents=[parents.common, parents.listing],
            help=bench.summary if bench else f"{name} (not available in this gpupool)",
        )
        _add_own_options(q)
        if bench is None:
            q.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
            q.set_defaults(handler=Offline(_not_available))
        else:
            bench.module.add_arguments(q)
            q.set_defaults(handler=Offline(cmd_bench))
    from gpupool.cli.bench.compare import register_compare

    register_compare(names, parents)


def _add_own_options(q: argparse.ArgumentParser) -> None:
    q.add_argument(
        "--gpus",
        type=int,
        default=None,
        metavar="N",
        help="run as a pool job with N GPUs (waits for it; shows its queue position)",
    )
    q.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="FILE",
        help="write the result's JSON here (default: a new file under "
        "$XDG_CACHE_HOME/gpupool/benchmarks/)",
    )
    q.add_argument("--no-save", action="store_true", help="do not save the result in the pool")


def _not_available(args: argparse.Namespace) -> int:
    print(
        f"gpupool: benchmark {args.benchmark} is not available in this gpupool "
        "(its module is not installed)",
        file=sys.stderr,
    )
    return 2


def cmd_bench(args: argparse.Namespace) -> int:
    from gpupool.hwbench.modules import load

    bench = load(args.benchmark)
    assert bench is not None  # only registered with a handler when its module loads
    if args.gpus is not None and args.gpus < 1:
        print(f"gpupool: --gpus: at least 1, got {args.gpus}", file=sys.stderr)
        return 2
    out: Path = args.out or default_out(bench.name)
    if args.gpus is not None:
        if bench.needs_torch and not torch_importable():  # the job would fail without it
            print(f"gpupool: {NO_TORCH}", file=sys.stderr)
            return 2
        if not _make_parent(out):
            return 2
        result = _as_pool_job(bench, args, out)
        if isinstance(result, int):
            return result
    else:
        ran = _here(bench, args)
        if isinstance(ran, int):
            return ran
        result = ran
        from gpupool.hwbench.job import write_result

        if not _make_parent(out):
            return 2
        write_result(out, result.dumps())
    return _report(result, args, out)


def torch_importable() -> bool:
    """Whether `import torch` would find it, without importing it (~1 s): a `--gpus` job
    runs this interpreter in this environment (cli/bench/job.py), so it would not either."""
    import importlib.util

    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # a broken or half-removed installation
        return False


def _make_parent(out: Path) -> bool:
    """Create the result file's directory (only once there is something to write)."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"gpupool: --out: cannot create {out.parent}: {exc.strerror}", file=sys.stderr)
        return False
    return True


def default_out(name: str) -> Path:
    """A new file in the user's cache: NAME-HOST-YYYYmmdd-HHMMSS-PID.json."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    host = socket.gethostname().split(".")[0] or "host"
    return Path(cache) / "gpupool" / "benchmarks" / f"{name}-{host}-{stamp}-{os.getpid()}.json"


def _here(bench: Benchmark, args: argparse.Namespace) -> BenchResult | int:
    from gpupool.hwbench.progress import Bar

    bar = Bar(sys.stderr)
    try:
        return bench.module.run(args, bar)
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            raise
        print(f"gpupool: {NO_TORCH}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"gpupool: bench {bench.name}: {exc}", file=sys.stderr)
        return 2
    finally:
        bar.finish()


def _as_pool_job(bench: Benchmark, args: argparse.Namespace, out: Path) -> BenchResult | int:
    from gpupool.cli.bench.job import run_as_job
    from gpupool.client import Client

    client = Client(args.state_dir, url=args.url)
    return run_as_job(client, bench, args, out)


def _report(result: BenchResult, args: argparse.Namespace, out: Path) -> int:
    from gpupool.cli.bench.render import print_result
    from gpupool.cli.render import print_json

    if args.json:
        print_json(result.to_json())
    else:
        print_result(result)
    stored = "not saved in the pool (--no-save)"
    if not args.no_save:
        stored = _save(result, args)
    print(f"result: {out}; {stored}", file=sys.stderr)
    if not result.passed:
        failed = ", ".join(k for k, ok in result.checks.items() if not ok)
        print(f"gpupool: bench {result.benchmark}: check failed: {failed}", file=sys.stderr)
        return 1
    return 0


def _save(result: BenchResult, args: argparse.Namespace) -> str:
    """Send the result to the pool; what became of it, in words."""
    from gpupool.client import ApiError, BadClientSetting, Client, PoolUnreachable

    try:
        client: Client = Client(args.state_dir, url=args.url)
        saved = client.save_benchmark(result.to_json())
    except PoolUnreachable as exc:
        return f"NOT stored in the pool: no pool answered at {exc.where}"
    except BadClientSetting as exc:
        return f"NOT stored in the pool: {exc}"
    except ApiError as exc:
        return f"NOT stored in the pool: {exc.message}"
    return f"stored in the pool as result {saved.id} (gpupool bench compare {saved.id})"
