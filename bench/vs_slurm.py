"""The same trivial job through the local gpupool daemon and through real Slurm, side by side.

Issue 16's goal: gpupool at least 10x faster than Slurm on this machine, for submit-to-start
latency and for submissions per second. Both systems run at once in one run and take turns:
- gpupool: a daemon of this checkout (`gpupool server --gpus 8xA100-80GB`, embedded SQLite in
  a temporary state directory: bench/daemon_scale.py's Daemon);
- Slurm: a real one-node Slurm (bench/slurm_local.py: munged, slurmctld, slurmd, 8 fake GPUs
  as character devices) with the fast scheduler settings of /work/shared/ENGINES.md
  (SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,sched_interval=2; sched/backfill,
  the default). If Slurm cannot be had, its side is {"skipped": why}.
The job: one GPU declared; `true`, or for latency a shell line that records when it ran.

Measured:
- latency (`--runs` rounds after 2 warm-up rounds, the paths in a rotating order each round, on
  idle systems: each waits for its previous job to end, then 0.3 s): the wall clock just before
  the submit call -> the job's command running, read from the command itself
  (`/bin/sh -c 'date +%s%N > MARKER'`, the same line on both sides: the clock of the job's own
  first instruction). Paths: gpupool's SDK (`gpupool.Client().submit(Job(...))` in this
  process), `gpupool submit` (a new Python process, bytecode cached), `sbatch --wrap`. Also the
  submit call's own return (`ack`). p50 / p99 / max.
- throughput: `--jobs` submissions of `true` as fast as each path goes, while one job holds all
  8 GPUs on each side (so the jobs queue: the submit path is measured, not job start-up); the
  pending ones are cancelled between paths so each starts with the same queue. Paths:
  `sbatch` one after another and from `--clients` concurrent workers; `gpupool submit` the
  same two ways; the SDK from one client and from `--clients` threads (each its own Client);
  one array of `--jobs` tasks (at most 1,000: Slurm's MaxArraySize) in one call; and
  gpupool's batches of 1,000 distinct jobs (`Client.submit_many`, at least 5 of them), per job,
  from one client and from 2 client processes at once (each started and ready before the
  clock starts, as Slurm's `sbatch` workers are other processes).
  For each: submissions per second, and the CPU spent per submission by the server
  (slurmctld / the gpupool daemon, from /proc) and by the clients (this process and the
  commands it ran), which says where the time goes.
- ratios: Slurm's latency / gpupool's, gpupool's submissions per second / Slurm's, per path
  and best against best (one job per call); distinct jobs queued per second, gpupool's
  batches against Slurm's best path (Slurm has no call for many distinct jobs); whether the
  10x goal is met on each.
Prints one JSON object on stdout (machine, load before/after, versions, config); progress on
stderr. Usage: python bench/vs_slurm.py [--runs 20] [--jobs 200] [--clients 8] [--no-slurm]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from daemon_scale import TEN_YEARS_S, Daemon, summary  # noqa: E402
from slurm_local import SlurmCluster, SlurmUnavailable, local_slurm  # noqa: E402

import gpupool  # noqa: E402
from gpupool import Client, Job  # noqa: E402
from gpupool.core.job import JobState  # noqa: E402

GPUS = 8
SETTLE_S = 0.3
MAX_ARRAY_TASKS = 1000  # Slurm's MaxArraySize is 1001 by default: indices 0-1000
BATCH_JOBS = 1000  # distinct jobs per `submit_many`: gpupool.core.batch.MAX_BATCH
BATCH_PROCESSES = 2  # batch clients at once, each its own process (one per core here)
SLURM_SETTINGS = (
    "one node, CPUs=nproc, Gres=gpu:8 (char devices), select/cons_tres CR_Core, "
    "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,sched_interval=2 "
    "(sched/backfill), munge auth, no slurmdbd (accounting_storage/none)"
)


def say(text: str) -> None:
    print(f"[vs_slurm {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def marker_line(path: Path) -> str:
    # `date` records when the job's own command ran (ns since the epoch); mv: never half-read.
    return f"date +%s%N > {path}.tmp && mv {path}.tmp {path}"


def wait_marker(path: Path, timeout: float = 60.0) -> float:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            text = path.read_text().strip()
            if text:
                return int(text) / 1e9
        except FileNotFoundError:
            pass
        time.sleep(0.0005)
    raise TimeoutError(f"{path} was not written in {timeout} s")


def wait_until(ready: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.02)


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def clients_cpu_s() -> float:
    """CPU of this process (SDK clients) and of the commands it ran and waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run_ok(cmd: list[str], env: dict[str, str], cwd: Path) -> str:
    out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}... exited {out.returncode}: {out.stderr[-500:]}")
    return out.stdout


class Sides:
    """Both systems, up, and the ways of submitting to each."""

    def __init__(self, work: Path, daemon: Daemon, cluster: SlurmCluster | None) -> None:
        self.work, self.daemon, self.cluster = work, daemon, cluster
        # Python with its bytecode cache, as an installed `gpupool` runs.
        self.cli_env = {k: v for k, v in daemon.env.items() if k != "PYTHONDONTWRITEBYTECODE"}
        self.sdk = Client(state_dir=daemon.state)

    # -- gpupool
    def gpupool_cli(self, *words: str) -> int:
        cmd = [sys.executable, "-m", "gpupool", "submit", "--parsable", *words]
        return int(run_ok(cmd, self.cli_env, self.work).strip())

    def gpupool_sdk(self, command: list[str], client: Client | None = None, gpus: int = 1) -> int:
        job = Job(command, gpus=gpus, time=None, workdir=str(self.work))
        return (client or self.sdk).submit(job).id

    def gpupool_sdk_batch(self, command: list[str], jobs: int) -> list[int]:
        """`jobs` distinct jobs (each its own name) in one `submit_many`."""
        sweep = [
            Job(command, gpus=1, time=None, workdir=str(self.work), name=f"sweep-{k}")
            for k in range(jobs)
        ]
        return [handle.id for handle in self.sdk.submit_many(sweep)]

    def gpupool_done(self, job_id: int) -> bool:
        return self.sdk.http.job(job_id).state.terminal

    def gpupool_cancel_pending(self) -> None:
        """Cancel every pending job; return when the daemon lists none (a cancel is applied
        by the engine: waiting here keeps that work out of the next path's timing)."""
        while (pending := self.sdk.http.job_page(states=["PENDING"], limit=1000)).jobs:
            for view in pending.jobs:
                self.sdk.http.cancel(view.id)
            self.wait_pending_at_most(pending.total - len(pending.jobs))  # a page at a time

    def wait_pending_at_most(self, left: int) -> None:
        wait_until(lambda: self.gpupool_pending() <= left, "gpupool's pending jobs cancelled")

    def gpupool_pending(self) -> int:
        return self.sdk.http.job_page(states=["PENDING"], limit=1).total

    # -- Slurm
    def sbatch(self, *words: str) -> int:
        assert self.cluster is not None
        out = self.work / "slurm" / "out" / "%j.out"
        cmd = ["sbatch", "--parsable", f"--output={out}", f"--chdir={self.work}", *words]
        return int(run_ok(cmd, self.cluster.env, self.work).strip().split(";")[0])

    def slurm_state(self, job_id: int) -> str:
        """squeue's state of the job; "" once it has left the queue."""
        assert self.cluster is not None
        out = self.cluster.run(["squeue", "-h", "-j", str(job_id), "-o", "%T"], check=False)
        return out.stdout.strip()

    def slurm_done(self, job_id: int) -> bool:
        return self.slurm_state(job_id) in ("", "COMPLETED")

    def slurm_cancel_pending(self) -> None:
        assert self.cluster is not None
        self.cluster.run(["scancel", "--state=PENDING", "--user", "root"])
        wait_until(lambda: self.slurm_pending() == 0, "Slurm's pending jobs cancelled")

    def slurm_pending(self) -> int:
        assert self.cluster is not None
        listed = self.cluster.run(["squeue", "-h", "-r", "-t", "PD", "-o", "%i"]).stdout
        return len(listed.split())  # -r: an array's pending tasks one by one


# -- latency ------------------------------------------------------------------------------


def latency(sides: Sides, runs: int) -> dict[str, Any]:
    """Submit -> the job's command running, one job at a time on idle systems."""
    tmp = sides.work / "markers"
    tmp.mkdir(exist_ok=True)

    def gpupool_sdk(m: Path) -> Callable[[], bool]:
        job_id = sides.gpupool_sdk(["/bin/sh", "-c", marker_line(m)])
        return lambda: sides.gpupool_done(job_id)

    def gpupool_cli(m: Path) -> Callable[[], bool]:
        job_id = sides.gpupool_cli("--gpus", "1", "--", "/bin/sh", "-c", marker_line(m))
        return lambda: sides.gpupool_done(job_id)

    def slurm_sbatch(m: Path) -> Callable[[], bool]:
        job_id = sides.sbatch("--gres=gpu:1", "--wrap", marker_line(m))
        return lambda: sides.slurm_done(job_id)

    paths: dict[str, Callable[[Path], Callable[[], bool]]] = {
        "gpupool_sdk": gpupool_sdk,
        "gpupool_cli": gpupool_cli,
    }
    if sides.cluster is not None:
        paths["slurm_sbatch"] = slurm_sbatch
    start: dict[str, list[float]] = {name: [] for name in paths}
    ack: dict[str, list[float]] = {name: [] for name in paths}
    names = list(paths)
    warmup = 2
    for r in range(warmup + runs):
        if r % 5 == 0:
            say(f"latency round {r + 1}/{warmup + runs} (the first {warmup}: warm-up)")
        for name in names[r % len(names) :] + names[: r % len(names)]:
            marker = tmp / f"{name}-{r}"
            t0 = time.time()
            done = paths[name](marker)
            t_ack = time.time()
            t_start = wait_marker(marker)
            wait_until(done, f"{name} job {r} did not end")
            time.sleep(SETTLE_S)  # the system idle again (gpupool: its standby supervisor)
            if r >= warmup:
                start[name].append((t_start - t0) * 1000)
                ack[name].append((t_ack - t0) * 1000)
    return {
        name: {
            "submit_to_start": summary(start[name]),
            "submit_call_returns": summary(ack[name]),
            "submit_to_start_samples_ms": [round(ms, 1) for ms in start[name]],
        }
        for name in names
    }


# -- throughput ---------------------------------------------------------------------------


def timed_batch(
    submit_one: Callable[[int], object], n: int, workers: int, server_pid: int
) -> dict[str, Any]:
    """n submissions from `workers` concurrent workers: per second, CPU per submission."""
    errors: list[str] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        try:
            submit_one(i)
        except Exception as exc:  # counted: an error is a result, not a crash
            with lock:
                errors.append(f"{type(exc).__name__}: {exc}"[:300])

    server0, clients0 = proc_cpu_s(server_pid), clients_cpu_s()
    t0 = time.perf_counter()
    if workers == 1:
        for i in range(n):
            one(i)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, range(n)))
    wall = time.perf_counter() - t0
    server, clients = proc_cpu_s(server_pid) - server0, clients_cpu_s() - clients0
    return {
        "submissions": n,
        "workers": workers,
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "wall_s": round(wall, 3),
        "per_s": round((n - len(errors)) / wall, 1),
        "server_cpu_ms_per_submission": round(server * 1000 / n, 2),
        "clients_cpu_ms_per_submission": round(clients * 1000 / n, 2),
    }


def batch_worker(state_dir: str, workdir: str, batches: int, prefix: str) -> None:
    """A client process of its own (`--batch-worker`): says it is ready, waits for a line on
    stdin, then queues `batches` batches of BATCH_JOBS distinct jobs, each built then sent as
    a sweep script would; prints its CPU seconds and errors for those as JSON."""
    client = Client(state_dir=Path(state_dir))
    print("ready", flush=True)
    sys.stdin.readline()
    t0, errors = os.times(), []
    for b in range(batches):
        sweep = [
            Job(["true"], gpus=1, time=None, workdir=workdir, name=f"{prefix}-{b}-{k}")
            for k in range(BATCH_JOBS)
        ]
        try:
            client.submit_many(sweep)
        except Exception as exc:  # counted: an error is a result
            errors.append(f"{type(exc).__name__}: {exc}"[:300])
    t1 = os.times()
    cpu = t1.user + t1.system - t0.user - t0.system
    print(json.dumps({"cpu_s": cpu, "errors": errors}), flush=True)


def timed_worker_processes(
    sides: Sides, processes: int, batches_each: int, server_pid: int
) -> dict[str, Any]:
    """`processes` batch clients, each its own Python process started and ready before the
    clock starts (their interpreters' start-up is not a submission), all told to go at
    once: distinct jobs queued per second, CPU per job of the daemon and of the clients."""
    env = {**sides.cli_env, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'bench'}"}
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--batch-worker",
                str(sides.daemon.state),
                str(sides.work),
                str(batches_each),
                f"p{w}",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )  # fmt: skip
        for w in range(processes)
    ]
    for w in workers:
        assert w.stdout is not None and w.stdout.readline().strip() == "ready"
    server0 = proc_cpu_s(server_pid)
    t0 = time.perf_counter()
    for w in workers:
        assert w.stdin is not None
        w.stdin.write("go\n")
        w.stdin.flush()
    reports = [json.loads(w.communicate()[0]) for w in workers]
    wall = time.perf_counter() - t0
    server = proc_cpu_s(server_pid) - server0
    jobs = processes * batches_each * BATCH_JOBS
    errors = [e for r in reports for e in r["errors"]]
    return {
        "submissions": jobs,
        "calls": processes * batches_each,
        "jobs_per_call": BATCH_JOBS,
        "workers": processes,
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "wall_s": round(wall, 3),
        "per_s": round((jobs - len(errors) * BATCH_JOBS) / wall, 1),
        "server_cpu_ms_per_submission": round(server * 1000 / jobs, 3),
        "clients_cpu_ms_per_submission": round(sum(r["cpu_s"] for r in reports) * 1000 / jobs, 3),
    }


def hold_all_gpus(sides: Sides) -> None:
    """One job on all 8 GPUs on each side: what is submitted next waits in the queue."""
    holder = sides.gpupool_sdk(["sleep", "3600"], gpus=GPUS)
    wait_until(
        lambda: sides.sdk.http.job(holder).state is JobState.RUNNING, "gpupool holder running"
    )
    if sides.cluster is not None:
        job_id = sides.sbatch(f"--gres=gpu:{GPUS}", "--wrap", "sleep 3600")
        wait_until(lambda: sides.slurm_state(job_id) == "RUNNING", "Slurm holder running")


def sdk_per_thread(sides: Sides, clients: int) -> Callable[[int], object]:
    """A submission of `true` through the SDK client of the calling thread: each of up to
    `clients` threads gets one of its own, as that many programs would have."""
    sdk_clients = [Client(state_dir=sides.daemon.state) for _ in range(clients)]
    local = threading.local()
    lock = threading.Lock()

    def submit(i: int) -> object:
        if not hasattr(local, "client"):
            with lock:
                local.client = sdk_clients.pop()
        return sides.gpupool_sdk(["true"], local.client)

    return submit


def throughput(sides: Sides, n: int, clients: int) -> dict[str, dict[str, Any]]:
    hold_all_gpus(sides)
    gp_pid = sides.daemon.proc.pid if sides.daemon.proc else 0
    sdk_concurrent = sdk_per_thread(sides, clients)
    tasks = min(n, MAX_ARRAY_TASKS)
    array = f"0-{tasks - 1}"
    batches = max(n // BATCH_JOBS, 5)  # jobs in all: at least 5 batches, timed together
    gp: dict[str, tuple[Callable[[int], object], int, int]] = {
        "gpupool_cli_serial": (lambda i: sides.gpupool_cli("--gpus", "1", "--", "true"), 1, n),
        f"gpupool_cli_{clients}_workers": (
            lambda i: sides.gpupool_cli("--gpus", "1", "--", "true"),
            clients,
            n,
        ),
        "gpupool_sdk_serial": (lambda i: sides.gpupool_sdk(["true"]), 1, n),
        f"gpupool_sdk_{clients}_clients": (sdk_concurrent, clients, n),
        "gpupool_cli_array": (
            lambda i: sides.gpupool_cli("--array", array, "--gpus", "1", "--", "true"),
            1,
            1,
        ),
        "gpupool_sdk_batches": (
            lambda i: sides.gpupool_sdk_batch(["true"], BATCH_JOBS),
            1,
            batches,
        ),
    }
    sl: dict[str, tuple[Callable[[int], object], int, int]] = {
        "slurm_sbatch_serial": (lambda i: sides.sbatch("--gres=gpu:1", "--wrap", "true"), 1, n),
        f"slurm_sbatch_{clients}_workers": (
            lambda i: sides.sbatch("--gres=gpu:1", "--wrap", "true"),
            clients,
            n,
        ),
        "slurm_sbatch_array": (
            lambda i: sides.sbatch(f"--array={array}", "--gres=gpu:1", "--wrap", "true"),
            1,
            1,
        ),
    }
    # Take turns: each Slurm path next to gpupool's of the same kind.
    order = [
        "slurm_sbatch_serial", "gpupool_cli_serial", "gpupool_sdk_serial",
        f"slurm_sbatch_{clients}_workers", f"gpupool_cli_{clients}_workers",
        f"gpupool_sdk_{clients}_clients", "gpupool_sdk_batches",
        f"gpupool_sdk_batches_{BATCH_PROCESSES}_processes",
        "slurm_sbatch_array", "gpupool_cli_array",
    ]  # fmt: skip
    out: dict[str, dict[str, Any]] = {}
    for name in order:
        if name in sl and sides.cluster is None:
            continue
        if name == f"gpupool_sdk_batches_{BATCH_PROCESSES}_processes":
            say(f"throughput: {name} ({batches} batches in all)")
            each = -(-batches // BATCH_PROCESSES)  # at least `batches` in all
            out[name] = timed_worker_processes(sides, BATCH_PROCESSES, each, gp_pid)
            out[name]["pending_after"] = sides.gpupool_pending()
            sides.gpupool_cancel_pending()
            continue
        submit_one, workers, calls = (gp | sl)[name]
        say(f"throughput: {name} ({calls} call(s), {workers} worker(s))")
        pid = sides.cluster.procs["slurmctld"].pid if name in sl and sides.cluster else gp_pid
        result = timed_batch(submit_one, calls, workers, pid)
        if calls == 1:  # an array: one call, n jobs
            result = array_result(result, tasks)
        elif name == "gpupool_sdk_batches":
            result = batches_result(result, BATCH_JOBS)
        # All queued behind the holder, none started: the submit path alone was measured.
        result["pending_after"] = sides.slurm_pending() if name in sl else sides.gpupool_pending()
        out[name] = result
        if name in sl:
            sides.slurm_cancel_pending()
        else:
            sides.gpupool_cancel_pending()
    return out


def array_result(result: dict[str, Any], tasks: int) -> dict[str, Any]:
    wall = result["wall_s"]
    return {
        "tasks_in_one_call": tasks,
        "errors": result["errors"],
        "first_error": result["first_error"],
        "wall_s": wall,
        "per_s": round(tasks / wall, 1) if not result["errors"] else 0.0,
        "server_cpu_ms": round(result["server_cpu_ms_per_submission"], 1),
        "clients_cpu_ms": round(result["clients_cpu_ms_per_submission"], 1),
    }


def batches_result(result: dict[str, Any], jobs_per_call: int) -> dict[str, Any]:
    """A batch path's figures per job, not per call."""
    calls = result["submissions"]
    jobs = calls * jobs_per_call
    return {
        **result,
        "submissions": jobs,
        "calls": calls,
        "jobs_per_call": jobs_per_call,
        "per_s": round((calls - result["errors"]) * jobs_per_call / result["wall_s"], 1),
        "server_cpu_ms_per_submission": round(
            result["server_cpu_ms_per_submission"] / jobs_per_call, 3
        ),
        "clients_cpu_ms_per_submission": round(
            result["clients_cpu_ms_per_submission"] / jobs_per_call, 3
        ),
    }


# -- ratios -------------------------------------------------------------------------------


def ratios(lat: dict[str, Any], tput: dict[str, dict[str, Any]], clients: int) -> dict[str, Any]:
    """Slurm's time over gpupool's, gpupool's rate over Slurm's: > 1 means gpupool faster."""
    if "slurm_sbatch" not in lat:
        return {}
    slurm = lat["slurm_sbatch"]["submit_to_start"]

    def times(a: float, b: float) -> float:
        return round(a / b, 2) if b else float("inf")

    lat_r = {
        f"{path}_{q}": times(slurm[f"{q}_ms"], lat[path]["submit_to_start"][f"{q}_ms"])
        for path in ("gpupool_sdk", "gpupool_cli")
        for q in ("p50", "p99")
    }
    pairs = {
        "cli_serial_vs_sbatch_serial": ("gpupool_cli_serial", "slurm_sbatch_serial"),
        "cli_workers_vs_sbatch_workers": (
            f"gpupool_cli_{clients}_workers",
            f"slurm_sbatch_{clients}_workers",
        ),
        "sdk_serial_vs_sbatch_serial": ("gpupool_sdk_serial", "slurm_sbatch_serial"),
        "sdk_clients_vs_sbatch_workers": (
            f"gpupool_sdk_{clients}_clients",
            f"slurm_sbatch_{clients}_workers",
        ),
        "array_vs_array": ("gpupool_cli_array", "slurm_sbatch_array"),
    }
    tput_r = {k: times(tput[g]["per_s"], tput[s]["per_s"]) for k, (g, s) in pairs.items()}
    one_per_call = {
        k: v["per_s"] for k, v in tput.items() if "_batches" not in k and "_array" not in k
    }
    best_gp = max(v for k, v in one_per_call.items() if k.startswith("gpupool"))
    best_sl = max(v for k, v in one_per_call.items() if k.startswith("slurm"))
    tput_r["best_vs_best_one_job_per_call"] = times(best_gp, best_sl)
    # Distinct jobs queued per second, each side its fastest way: gpupool's batches against
    # Slurm's best one-job-per-call path (Slurm has no call for many distinct jobs; its
    # arrays are one command over indices, compared on their own above).
    tput_r["distinct_jobs_sdk_batches_vs_best_sbatch"] = times(
        tput["gpupool_sdk_batches"]["per_s"], best_sl
    )
    procs = tput.get(f"gpupool_sdk_batches_{BATCH_PROCESSES}_processes", {}).get("per_s", 0.0)
    tput_r[f"distinct_jobs_sdk_batches_{BATCH_PROCESSES}_processes_vs_best_sbatch"] = times(
        procs, best_sl
    )
    best_distinct = max(tput["gpupool_sdk_batches"]["per_s"], procs)
    return {
        "latency_slurm_over_gpupool": lat_r,
        "throughput_gpupool_over_slurm": tput_r,
        "goal_10x_met": {
            "latency_p50_sdk": lat_r["gpupool_sdk_p50"] >= 10,
            "latency_p99_sdk": lat_r["gpupool_sdk_p99"] >= 10,
            "latency_p50_cli": lat_r["gpupool_cli_p50"] >= 10,
            "throughput_best_vs_best": tput_r["best_vs_best_one_job_per_call"] >= 10,
            "throughput_distinct_jobs_best": times(best_distinct, best_sl) >= 10,
            "throughput_distinct_jobs_one_client": (
                tput_r["distinct_jobs_sdk_batches_vs_best_sbatch"] >= 10
            ),
            "throughput_cli_vs_sbatch_serial": tput_r["cli_serial_vs_sbatch_serial"] >= 10,
            "throughput_arrays": tput_r["array_vs_array"] >= 10,
        },
    }


def floor_ms(env: dict[str, str], cwd: Path, n: int = 10) -> dict[str, float]:
    """`python -c pass`: the interpreter start every `gpupool submit` pays first."""
    walls = []
    for _ in range(n):
        t0 = time.perf_counter()
        run_ok([sys.executable, "-c", "pass"], env, cwd)
        walls.append((time.perf_counter() - t0) * 1000)
    return summary(walls)


def fsync_ms(directory: Path, n: int = 20) -> dict[str, float]:
    """One small write and fsync in the daemon's state directory: what each acknowledged
    gpupool submission waits for at least once (SQLite WAL, synchronous=FULL)."""
    walls = []
    path = directory / "fsync-probe"
    with open(path, "ab") as f:
        for _ in range(n):
            t0 = time.perf_counter()
            f.write(b"x" * 200)
            f.flush()
            os.fsync(f.fileno())
            walls.append((time.perf_counter() - t0) * 1000)
    path.unlink()
    return summary(walls)


def started_daemon(stack: ExitStack, folder: Path, pending: int = 0) -> Daemon:
    """A daemon of this checkout in `folder` (made here), holding `pending` jobs held ten
    years ahead (put in its database before it starts), stopped when `stack` closes."""
    folder.mkdir()
    daemon = Daemon(ROOT, folder)
    if pending:
        daemon.fill(pending, time.time() + TEN_YEARS_S)
    stack.callback(daemon.stop)
    daemon.start()
    return daemon


def run_header(benchmark: str, config: dict[str, Any]) -> dict[str, Any]:
    """What every result of the issue-35 benches starts with: its name, the machine, the
    load before it, the version measured and its settings."""
    return {
        "benchmark": benchmark,
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "load_before": os.getloadavg(),
        "versions": {"gpupool": f"{gpupool.__version__} ({git_rev()})"},
        "config": config,
    }


def git_rev() -> str:
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True)  # fmt: skip
    return out.stdout.strip() or "unknown"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=20, help="latency samples per path")
    p.add_argument("--jobs", type=int, default=200, help="submissions per throughput path")
    p.add_argument("--clients", type=int, default=8, help="concurrent submitters")
    p.add_argument("--no-slurm", action="store_true", help="measure gpupool alone")
    p.add_argument("--batch-worker", nargs=4, metavar=("STATE", "WORKDIR", "N", "PREFIX"),
                   help=argparse.SUPPRESS)  # fmt: skip
    args = p.parse_args()
    if args.batch_worker:
        state, workdir, n, prefix = args.batch_worker
        batch_worker(state, workdir, int(n), prefix)
        return
    os.environ.pop("GPUPOOL_URL", None)
    result: dict[str, Any] = {
        "benchmark": "vs_slurm",
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "kernel": os.uname().release,
        },
        "load_before": os.getloadavg(),
        "versions": {"gpupool": f"{gpupool.__version__} ({git_rev()})"},
        "config": {
            "runs": args.runs,
            "jobs": args.jobs,
            "clients": args.clients,
            "gpus_declared": GPUS,
            "job": "one GPU; `true` (throughput) or `/bin/sh -c 'date +%s%N > MARKER'` (latency)",
            "gpupool": "gpupool server --gpus 8xA100-80GB, SQLite in a temporary state dir",
            "slurm": SLURM_SETTINGS,
            "latency_measures": "time.time() before the submit call -> the job command's own "
            "`date +%s%N`; idle systems (previous job ended, then 0.3 s)",
        },
    }
    t_begin = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpupool-vs-slurm-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        say("starting the gpupool daemon")
        daemon = started_daemon(stack, work / "pool")
        cluster: SlurmCluster | None = None
        if not args.no_slurm:
            say("starting Slurm (munged, slurmctld, slurmd)")
            try:
                cluster = stack.enter_context(local_slurm(work / "slurm", gpus=GPUS))
                result["versions"]["slurm"] = cluster.run(["sbatch", "--version"]).stdout.strip()
            except (SlurmUnavailable, RuntimeError, OSError, subprocess.SubprocessError) as e:
                result["slurm"] = {"skipped": f"{type(e).__name__}: {e}"[:2000]}
        sides = Sides(work, daemon, cluster)
        result["latency"] = latency(sides, args.runs)
        result["throughput"] = throughput(sides, args.jobs, args.clients)
        result["floor_python_c_pass"] = floor_ms(sides.cli_env, work)
        result["fsync_in_state_dir"] = fsync_ms(daemon.state)
        say("stopping both")
    result["ratios"] = ratios(result["latency"], result["throughput"], args.clients)
    result["load_after"] = os.getloadavg()
    result["wall_s"] = round(time.monotonic() - t_begin, 1)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
