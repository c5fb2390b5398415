"""What a daemon costs with a long queue: idle CPU, memory, submit-to-start, `queue`, many
clients at once; and whether its memory stays flat under a steady stream of jobs.

Each daemon runs from a source tree (`--tree`, this checkout by default) on a declared
8-GPU inventory in a temporary state directory, with `--pending` jobs (10,000) held by a
`--begin` ten years ahead, put in its database before it starts (by that tree's own Store;
each with a 30-variable submitter environment, as `gpupool submit` sends). The database is
each of `--backends` in turn, side by side in one run: SQLite (the state directory's file)
and PostgreSQL (a fresh database on a throwaway server, tests/pg_server.py, fsync on; the
daemon gets it as --database-url; see bench/scale_databases.py). The baseline in the same
run is the daemon of `--baseline` (a git revision, main's 14a49dc by default, checked out
with `git worktree add` into a temporary directory and removed after), measured the same
way with its own CLI, on SQLite only (its PostgreSQL support predates issue 13's).
Measured, for each:
- idle_cpu: the share of one core the daemon used over `--idle-s` seconds with nothing to do
  (on PostgreSQL also the database cluster's share over the same seconds, apart)
- rss: resident memory (VmRSS, and its peak VmHWM) after the queue is loaded
- submit_to_start: a runnable job submitted through the API -> its first instruction runs
  (one at a time; p50, p99)
- queue_first_page / queue_all_json: wall time of `gpupool queue` and `gpupool queue --all
  --json` (a new Python process each, as a user runs them)
- concurrent_submit: `--clients` threads submitting `--per-client` held jobs each at once
  through the API: latency per submission (p50, p99) and errors
- pass_after_a_submission_in_process: the tree's Engine on a copy of the same database, in
  this process's Python: one held job submitted, then one round with a pass, timed, and the
  time spent inside policy.decide apart (p50 of `--rounds`)
- soak (`--soak-minutes N`): a fresh daemon, empty queue, 2 short jobs submitted per second
  for N minutes; RSS and live memory (the interpreter's allocated blocks, from /metrics)
  sampled every 10 s, and the growth of each per job over the second half (per backend, as
  the scale measurements)
Prints one JSON object: per tree, "scale" per backend. Usage:
    python bench/daemon_scale.py [--pending 10000] [--baseline 14a49dc | --no-baseline]
                                 [--backends sqlite,postgresql] [--soak-minutes 10]
                                 [--skip-scale]
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

sys.path.insert(0, str(ROOT))

from scale_databases import Backend, Databases, cluster_cpu_s  # noqa: E402
from tests.pg_server import PostgresServer  # noqa: E402

from gpupool.client import Client, JsonValue  # noqa: E402

TEN_YEARS_S = 10 * 365 * 86400.0
USER = pwd.getpwuid(os.geteuid()).pw_name
ENV_VARS = 30  # a submitter's environment, as `gpupool submit` captures it (sbatch --export=ALL)

FILL = """
import sys, time
from gpupool.core.job import JobSpec, Resources
from gpupool.store import Store
url, n, begin = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
env = tuple((f"BENCH_VAR_{i}", "x" * 40) for i in range(int(sys.argv[4])))
store = Store.open(url)
spec = JobSpec(command=("sleep", "1"), resources=Resources(gpus=1), begin_time=begin,
               base_env=env, workdir="/")
for _ in range(n):
    store.submit(spec, "bench", time.time())
store.close()
"""


# One scheduling round in process, after a submission, with the time inside policy.decide
# apart: what a pass costs beyond the policy (run by each tree's own code).
ROUNDS = """
import json, shutil, statistics, sys, tempfile, time
import gpupool.engine.loop as loop
from gpupool.core.job import JobSpec, Resources
from gpupool.engine import Engine
from gpupool.executor import LocalExecutor
from gpupool.inventory import resolve_inventory
from gpupool.store import Store
url, n = sys.argv[1], int(sys.argv[2])  # a copy of the measured database: it is changed
tmp = tempfile.mkdtemp()
inside = []
decide = loop.decide
def timed(snapshot, now):
    t0 = time.perf_counter()
    try:
        return decide(snapshot, now)
    finally:
        inside.append(time.perf_counter() - t0)
loop.decide = timed
store = Store.open(url)
engine = Engine(store, LocalExecutor(tmp + "/jobs"), resolve_inventory(gpus="8xA100-80GB"))
engine.recover()
engine.run_pass()
spec = JobSpec(command=("sleep", "1"), resources=Resources(gpus=1), begin_time=time.time() + 3e8,
               workdir="/")
rounds, decides = [], []
for _ in range(n):
    job = store.submit(spec, "bench", time.time())
    if hasattr(engine, "stored"):
        engine.stored(job)
    inside.clear()
    t0 = time.perf_counter()
    engine.run_pass()
    rounds.append((time.perf_counter() - t0) * 1000)
    decides.append(sum(inside) * 1000)
med = statistics.median
print(json.dumps({"round_ms_p50": round(med(rounds), 1), "decide_ms_p50": round(med(decides), 1),
                  "outside_decide_ms_p50": round(med(r - d for r, d in zip(rounds, decides)), 1),
                  "rounds": n}))
shutil.rmtree(tmp, ignore_errors=True)
"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summary(ms: list[float]) -> dict[str, float]:
    if not ms:
        return {"n": 0}
    return {
        "p50_ms": round(statistics.median(ms), 1),
        "p99_ms": round(pct(ms, 0.99), 1),
        "max_ms": round(max(ms), 1),
        "n": len(ms),
    }


class Daemon:
    """`gpupool server` of one source tree, in its own session; stopped by its PID.
    `database_url`: its --database-url (None: SQLite in its state directory)."""

    def __init__(self, tree: Path, root: Path, database_url: str | None = None) -> None:
        self.tree, self.root, self.database_url = tree, root, database_url
        # A daemon that names its callers itself (issue 13, api/identity.py) refuses a `user`
        # in a submission; an older one (the baseline, 14a49dc) requires it in the body.
        self.names_callers = (tree / "src/gpupool/api/identity.py").exists()
        self.state = root / "state"
        self.proc: subprocess.Popen[bytes] | None = None
        self.client = Client(self.state)

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(self.tree / "src")
        env["GPUPOOL_STATE_DIR"] = str(self.state)
        env.pop("GPUPOOL_URL", None)
        return env

    def python(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args], env=self.env, capture_output=True, text=True, **kw
        )

    def fill(self, n: int, begin: float) -> float:
        self.state.mkdir(parents=True, exist_ok=True)
        url = self.database_url or f"sqlite:///{self.state / 'state.db'}"
        t0 = time.perf_counter()
        out = self.python("-c", FILL, url, str(n), str(begin), str(ENV_VARS), timeout=3600)
        if out.returncode != 0:
            raise RuntimeError(f"fill failed: {out.stderr}")
        return time.perf_counter() - t0

    def start(self) -> None:
        log = open(self.root / "daemon.log", "wb")
        db = ["--database-url", self.database_url] if self.database_url else []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gpupool", "server", "--gpus", "8xA100-80GB", *db],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError((self.root / "daemon.log").read_text(errors="replace"))
            try:
                self.client.request("GET", "/healthz")
                return
            except OSError:
                time.sleep(0.1)
        raise TimeoutError("the daemon did not answer")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        for claim in (self.state / "jobs").glob("*/child.json"):
            try:
                os.killpg(int(json.loads(claim.read_text())["pgid"]), signal.SIGKILL)
            except (OSError, ValueError, KeyError):
                pass

    # -- what is measured

    def cpu_s(self) -> float:
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def memory_mb(self) -> dict[str, float]:
        assert self.proc is not None
        out: dict[str, float] = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = round(int(value.split()[0]) / 1024, 1)
        return out

    def live_blocks(self) -> float | None:
        """The daemon's live memory, its interpreter's allocated blocks, from /metrics
        (None from a tree whose daemon does not export it)."""
        status, _, body = self.client.request_raw("GET", "/metrics")
        for line in body.decode().splitlines() if status == 200 else ():
            if line.startswith("gpupool_daemon_python_allocated_blocks "):
                return float(line.split()[1])
        return None

    def idle_cpu(self, seconds: float) -> float:
        c0, t0 = self.cpu_s(), time.monotonic()
        time.sleep(seconds)
        return round((self.cpu_s() - c0) / (time.monotonic() - t0), 4)

    def cli_wall(self, args: list[str], n: int) -> tuple[list[float], int]:
        walls, size = [], 0
        for _ in range(n):
            t0 = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-m", "gpupool", *args],
                env=self.env,
                capture_output=True,
                timeout=600,
            )
            walls.append((time.perf_counter() - t0) * 1000)
            if out.returncode != 0:
                raise RuntimeError(f"gpupool {' '.join(args)}: {out.stderr.decode()}")
            size = len(out.stdout)
        return walls, size

    def submit(
        self, command: list[str], begin: float | None = None, time_limit_s: float | None = None
    ) -> int:
        env: dict[str, JsonValue] = {f"BENCH_VAR_{i}": "x" * 40 for i in range(ENV_VARS)}
        wire: dict[str, JsonValue] = {
            "command": list[JsonValue](command),
            "gpus": 1,
            "workdir": "/",
            "begin_time": begin,
            "base_env": env,
        }
        if time_limit_s is not None:
            wire["time_limit_s"] = time_limit_s
        return self.post_job(self.client, wire)

    def post_job(self, client: Client, spec: dict[str, JsonValue]) -> int:
        """Submit `spec` with a fresh token, in the body this daemon's tree expects."""
        if self.names_callers:
            return client.submit(spec, uuid.uuid4().hex).id
        body: dict[str, JsonValue] = {"spec": spec, "token": uuid.uuid4().hex, "user": USER}
        answer = client.request("POST", "/v1/jobs", body)
        assert isinstance(answer, dict) and isinstance(answer["id"], int), answer
        return answer["id"]


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
    raise TimeoutError(path)


def marker_command(path: Path) -> list[str]:
    return ["/bin/sh", "-c", f"date +%s%N > {path}.tmp && mv {path}.tmp {path}"]


def submit_to_start(d: Daemon, tmp: Path, n: int, time_limit_s: float | None = None) -> list[float]:
    """submit -> start of `n` 1-GPU jobs (of `time_limit_s`: None, the pool's default),
    each after the previous one ended."""
    out = []
    for i in range(n):
        time.sleep(0.3)  # let the previous job end: each start on an idle pool
        marker = tmp / f"start-{i}"
        t0 = time.time()
        d.submit(marker_command(marker), time_limit_s=time_limit_s)
        out.append((wait_marker(marker) - t0) * 1000)
    return out


def concurrent_submit(d: Daemon, clients: int, per_client: int) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    begin = time.time() + TEN_YEARS_S
    gate = threading.Barrier(clients)

    def client() -> None:
        mine = Client(d.state)
        gate.wait()
        for _ in range(per_client):
            wire: dict[str, JsonValue] = {
                "command": ["sleep", "1"],
                "gpus": 1,
                "workdir": "/",
                "begin_time": begin,
            }
            t0 = time.perf_counter()
            try:
                d.post_job(mine, wire)
                ms = (time.perf_counter() - t0) * 1000
                with lock:
                    latencies.append(ms)
            except Exception as exc:  # counted, not raised: errors are a result
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}"[:200])

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {
        "clients": clients,
        "per_client": per_client,
        "latency": summary(latencies),
        "errors": len(errors),
        "error_examples": errors[:3],
        "wall_s": round(wall, 2),
    }


def measure_scale(
    tree: Path, tmp: Path, args: argparse.Namespace, db: Databases, cluster: Path | None
) -> dict[str, Any]:
    """`cluster`: the PostgreSQL data directory whose CPU time is measured apart (None on
    SQLite, where the database is the daemon's own work)."""
    url = db.new()
    d = Daemon(tree, tmp, None if db.backend is Backend.SQLITE else url)
    fill_s = d.fill(args.pending, time.time() + TEN_YEARS_S)
    result: dict[str, Any] = {
        "backend": db.backend.value,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "fill_s": round(fill_s, 1),
    }
    out = d.python("-c", ROUNDS, db.copy(url), str(args.rounds), timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"rounds failed: {out.stderr}")
    result["pass_after_a_submission_in_process"] = json.loads(out.stdout)
    t0 = time.perf_counter()
    d.start()
    try:
        result["start_s"] = round(time.perf_counter() - t0, 2)
        time.sleep(args.settle_s)  # recovery and the first passes
        result.update(idle_shares(d, args.idle_s, cluster, ""))
        result["rss_mb"] = d.memory_mb()
        result["submit_to_start"] = summary(submit_to_start(d, tmp, args.starts))
        walls, size = d.cli_wall(["queue"], args.queue_runs)
        result["queue_first_page"] = {**summary(walls), "stdout_bytes": size}
        walls, size = d.cli_wall(["queue", "--all", "--json"], args.queue_all_runs)
        result["queue_all_json"] = {**summary(walls), "stdout_bytes": size}
        result["concurrent_submit"] = concurrent_submit(d, args.clients, args.per_client)
        time.sleep(args.settle_s)
        result.update(idle_shares(d, args.idle_s, cluster, "_after"))
        result["rss_mb_after"] = d.memory_mb()
        result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        d.stop()
    return result


def idle_shares(d: Daemon, seconds: float, cluster: Path | None, suffix: str) -> dict[str, float]:
    """The share of one core the idle daemon used, and its database server apart."""
    if cluster is None:
        return {f"idle_cpu_share{suffix}": d.idle_cpu(seconds)}
    c0 = cluster_cpu_s(cluster)
    t0 = time.monotonic()
    mine = d.idle_cpu(seconds)
    server = (cluster_cpu_s(cluster) - c0) / (time.monotonic() - t0)
    return {f"idle_cpu_share{suffix}": mine, f"db_server_idle_cpu_share{suffix}": round(server, 4)}


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y over x."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return 0.0 if sxx == 0 else sum((x - mx) * (y - my) for x, y in points) / sxx


def measure_soak(tree: Path, tmp: Path, minutes: float, db: Databases) -> dict[str, Any]:
    url = db.new()
    d = Daemon(tree, tmp, None if db.backend is Backend.SQLITE else url)
    d.state.mkdir(parents=True, exist_ok=True)
    d.start()
    samples: list[tuple[float, float]] = []  # (jobs submitted, RSS MB)
    live: list[tuple[float, float]] = []  # (jobs submitted, allocated blocks)

    def sample() -> None:
        samples.append((submitted, d.memory_mb()["VmRSS"]))
        blocks = d.live_blocks()
        if blocks is not None:
            live.append((submitted, blocks))

    submitted, errors = 0, 0
    try:
        t0 = time.monotonic()
        end = t0 + minutes * 60
        next_sample = t0
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_sample:
                sample()
                next_sample += 10.0
            try:
                d.submit(["true"])
                submitted += 1
            except Exception:
                errors += 1
            # 2 per second, on a grid: a slow answer is made up for
            time.sleep(max(0.0, t0 + submitted / 2.0 - time.monotonic()))
        sample()
    finally:
        d.stop()
    half = [p for p in samples if p[0] >= submitted / 2]
    live_half = [p for p in live if p[0] >= submitted / 2]
    return {
        "minutes": minutes,
        "jobs": submitted,
        "errors": errors,
        "rss_mb_first": samples[0][1],
        "rss_mb_mid": half[0][1] if half else None,
        "rss_mb_last": samples[-1][1],
        "kb_per_job_second_half": round(slope(half) * 1024, 2),
        "kb_per_job_overall": round(slope(samples) * 1024, 2),
        "live_blocks_first": live[0][1] if live else None,
        "live_blocks_mid": live_half[0][1] if live_half else None,
        "live_blocks_last": live[-1][1] if live else None,
        "live_blocks_per_job_second_half": round(slope(live_half), 2) if live else None,
        "live_blocks_per_job_overall": round(slope(live), 2) if live else None,
        "samples": samples,
        "live_samples": live,
    }


@contextmanager
def baseline_tree(rev: str, tmp: Path) -> Iterator[Path]:
    path = tmp / f"baseline-{rev}"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev],
        check=True,
        capture_output=True,
    )
    try:
        yield path
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)],
            capture_output=True,
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tree", type=Path, default=ROOT, help="the source tree measured")
    p.add_argument("--baseline", default="14a49dc", help="git revision of the baseline")
    p.add_argument("--no-baseline", action="store_true")
    p.add_argument(
        "--backends",
        default="sqlite",
        help="comma-separated databases to measure on, in this order: sqlite, postgresql",
    )
    p.add_argument("--pending", type=int, default=10_000)
    p.add_argument("--idle-s", type=float, default=20.0)
    p.add_argument("--settle-s", type=float, default=5.0)
    p.add_argument("--starts", type=int, default=20)
    p.add_argument("--queue-runs", type=int, default=7)
    p.add_argument("--queue-all-runs", type=int, default=3)
    p.add_argument("--rounds", type=int, default=15, help="in-process passes timed")
    p.add_argument("--clients", type=int, default=100)
    p.add_argument("--per-client", type=int, default=5)
    p.add_argument("--soak-minutes", type=float, default=0.0, help="0: no soak")
    p.add_argument("--skip-scale", action="store_true", help="only the soak")
    args = p.parse_args()
    try:
        backends = [Backend(b.strip()) for b in args.backends.split(",")]
    except ValueError as exc:
        p.error(f"--backends: {exc}")
    result: dict[str, Any] = {
        "benchmark": "daemon_scale",
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "pending": args.pending,
        "backends": [b.value for b in backends],
        "baseline_backends": [Backend.SQLITE.value],
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "targets": {
            "idle_cpu_share": 0.05,
            "submit_to_start_p50_ms": 50,
            "queue_first_page_ms": 150,
            "queue_all_json_ms": 1000,
            "concurrent_submit_p99_ms": 200,
            "rss_mb": 150,
        },
    }
    server = None
    if Backend.POSTGRESQL in backends:
        server = PostgresServer(durable=True).start()
        result["postgresql_server"] = "throwaway (tests/pg_server.py), fsync on, 127.0.0.1 TCP"
    try:
        measure_trees(args, backends, server, result)
    finally:
        if server is not None:
            server.stop()
    result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result, indent=2))


def measure_trees(
    args: argparse.Namespace,
    backends: list[Backend],
    server: PostgresServer | None,
    result: dict[str, Any],
) -> None:
    """Every tree on every backend it is measured on (the baseline on SQLite only), into
    `result`, by tree name."""
    with tempfile.TemporaryDirectory(prefix="gpupool-scale-") as d:
        tmp = Path(d)
        trees = {"gpupool": args.tree.resolve()}
        with contextlib_nullable(None if args.no_baseline else args.baseline, tmp) as base:
            if base is not None:
                trees[f"baseline_{args.baseline}"] = base
            for name, tree in trees.items():
                out: dict[str, Any] = {"tree": str(tree)}
                rev = subprocess.run(
                    ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                    capture_output=True,
                    text=True,
                ).stdout.strip()
                out["commit"] = rev
                mine = backends if name == "gpupool" else [Backend.SQLITE]
                if not args.skip_scale:
                    out["scale"] = {
                        b.value: on(b, tree, tmp / name / f"scale-{b.value}", args, server, False)
                        for b in mine
                    }
                if args.soak_minutes > 0:
                    out["soak"] = {
                        b.value: on(b, tree, tmp / name / f"soak-{b.value}", args, server, True)
                        for b in mine
                    }
                result[name] = out
                print(json.dumps({name: out}), file=sys.stderr)  # progress


def on(
    backend: Backend,
    tree: Path,
    tmp: Path,
    args: argparse.Namespace,
    server: PostgresServer | None,
    soak: bool,
) -> dict[str, Any]:
    """The scale measurements of `tree` on `backend`, or its soak."""
    pg = server if backend is Backend.POSTGRESQL else None
    db = Databases(backend, Daemon(tree, tmp).state, None if pg is None else pg.url)
    try:
        if soak:
            return measure_soak(tree, tmp, args.soak_minutes, db)
        return measure_scale(tree, tmp, args, db, None if pg is None else pg.data)
    finally:
        db.drop_all()


@contextmanager
def contextlib_nullable(rev: str | None, tmp: Path) -> Iterator[Path | None]:
    if rev is None:
        yield None
        return
    with baseline_tree(rev, tmp) as path:
        yield path


if __name__ == "__main__":
    main()
