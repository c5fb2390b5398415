"""`gpupool bench NAME --gpus N`: the benchmark as a pool job, waited for, its result read.

The job runs `python -m gpupool.hwbench.job NAME --result-file OUT WORDS...` with this
interpreter, where WORDS are the words given after NAME (the job's parser ignores `bench`'s
own options, so abbreviations mean the same there), under the submitter's environment and
working directory like any `gpupool submit`. A benchmark that declares `DISTRIBUTED = True`
gets `--distributed torchrun`: one process per GPU, rank 0 writes the file.

While it waits the command shows the job's id, then its place among the pending jobs in the
queue's order (what `gpupool queue` shows), then that it runs. Ctrl-C stops waiting and
leaves the job as it is, as `gpupool wait` does.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from gpupool.client import Client
from gpupool.core.job_enums import JobState
from gpupool.hwbench.modules import Benchmark
from gpupool.hwbench.result import BenchResult

JOB_MODULE = "gpupool.hwbench.job"
MAX_POSITION_SCAN = 1000  # pending jobs read to find this one's place


def job_text(argv: list[str], benchmark: str) -> list[str]:
    """The words after `bench BENCHMARK` in the command line as given."""
    for i in range(len(argv) - 1):
        if argv[i] == "bench" and argv[i + 1] == benchmark:
            return argv[i + 2 :]
    return []


def run_as_job(
    client: Client, bench: Benchmark, args: argparse.Namespace, out: Path
) -> BenchResult | int:
    from gpupool.spec import SpecError, build_wire
    from gpupool.spec.submitter import current_umask, submitter_environment

    out = out.absolute()
    words = job_text(list(getattr(args, "argv", [])), bench.name)
    command = [sys.executable, "-m", JOB_MODULE, bench.name, "--result-file", str(out), *words]
    fields: dict[str, object] = {
        "command": command,
        "gpus": args.gpus,
        "name": f"bench-{bench.name}",
    }
    if bench.distributed:
        fields["distributed"] = "torchrun"
    try:
        wire = build_wire(
            fields,
            base_env=submitter_environment(),
            default_workdir=os.getcwd(),
            umask=current_umask(),
        )
    except SpecError as exc:
        print(f"gpupool: {exc}", file=sys.stderr)
        return 2
    wire["project"] = None  # the daemon picks the user's default project
    if out.exists():
        out.unlink()  # a file left from before must not pass for this job's result
    job = client.submit_receipt(wire, token=os.urandom(16).hex())
    print(f"bench {bench.name}: job {job.id} in project {job.project}", file=sys.stderr)
    try:
        state = _wait(client, job.id)
    except KeyboardInterrupt:
        from gpupool.cli.jobs import detach_note

        print(f"\n{detach_note(client, job.id, 'stopped waiting')}", file=sys.stderr)
        return 130
    if not out.exists():
        print(
            f"gpupool: job {job.id} ended {state.value} without a result (gpupool logs {job.id})",
            file=sys.stderr,
        )
        return 1
    try:
        return BenchResult.from_json(json.loads(out.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        print(f"gpupool: job {job.id}'s result {out} cannot be read: {exc}", file=sys.stderr)
        return 1


def _wait(client: Client, job_id: int) -> JobState:
    """The job's final state; its queue position and start said on stderr as they change."""
    said = ""
    delay = 0.05
    while True:
        job = client.job(job_id)
        if job.state.terminal:
            return job.state
        if job.state is JobState.PENDING:
            now = f"pending, {_position(client, job_id)} (gpupool why {job_id})"
        else:
            now = f"{job.state.value.lower()} (gpupool logs -f {job_id})"
        if now != said:
            print(f"job {job_id}: {now}", file=sys.stderr)
            said = now
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


def _position(client: Client, job_id: int) -> str:
    page = client.job_page(states=["PENDING"], order="queue", limit=MAX_POSITION_SCAN)
    ids = [j.id for j in page.jobs]
    if job_id in ids:
        return f"position {ids.index(job_id) + 1} of {page.total} pending"
    return f"{page.total} pending"
