"""Faults on the real daemon: a supervisor killed under its job, a job that ends while the
daemon is down or while the state disk is full, and a restart on fewer GPUs. In each, no
GPU may be given while something of a job still runs on it, and no exit may be lost."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from private_tmpfs import fill, on_tmpfs, view, write_syscalls

from gpupool.client import ApiError, Client
from gpupool.executor.files import process_alive, read_json
from integration.backends import Databases
from integration.pool_harness import Pool, wait_for

PY = sys.executable
# until.py GO CODE [RECORD]: note the run in RECORD, run until the file GO exists, exit CODE.
UNTIL = """
import os, sys, time
if len(sys.argv) > 3:
    with open(sys.argv[3], "a") as f:
        f.write(" ".join([os.environ["GPUPOOL_JOB_ID"], os.environ["GPUPOOL_RESTART_COUNT"],
                          os.environ["CUDA_VISIBLE_DEVICES"], str(os.getpid())]) + "\\n")
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
sys.exit(int(sys.argv[2]))
"""
# witness.py PID TICKS OUT: write to OUT whether process PID (started at TICKS) still runs.
WITNESS = """
import sys
pid, ticks, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
try:
    with open(f"/proc/{pid}/stat", "rb") as f:
        raw = f.read()
    rest = raw[raw.rfind(b")") + 2 :].split()
    alive = int(rest[19]) == ticks and rest[0] not in (b"Z", b"X")
except OSError:
    alive = False
with open(out, "w") as f:
    f.write("alive" if alive else "gone")
"""


@pytest.fixture
def scripts(tmp_path: Path) -> dict[str, str]:
    paths = {"until": tmp_path / "until.py", "witness": tmp_path / "witness.py"}
    paths["until"].write_text(UNTIL)
    paths["witness"].write_text(WITNESS)
    return {k: str(v) for k, v in paths.items()}


def job_file(pool: Pool, job_id: int, name: str) -> dict[str, Any]:
    path = pool.state_dir / "jobs" / str(job_id) / name
    found: dict[str, Any] = wait_for(lambda: read_json(path), 30, f"{path}")
    return found


# -- 1. a supervisor killed with kill -9 -------------------------------------------------


@pytest.mark.parametrize("daemon_up", [True, False], ids=["daemon-up", "daemon-restarted"])
def test_a_job_whose_supervisor_died_is_killed_before_its_gpu_is_given_again(
    tmp_path: Path, scripts: dict[str, str], daemon_up: bool, databases: Databases
) -> None:
    pool = Pool(tmp_path / "pool", gpus="1xA100-80GB", database_url=databases.new_url()).start()
    try:
        first = pool.submit("--gpus", "1", "--", PY, scripts["until"], str(tmp_path / "never"), "0")
        pool.wait_state(first, "RUNNING")
        child = job_file(pool, first, "child.json")
        claim = job_file(pool, first, "claim.json")
        # The next job on that GPU looks, as it starts, whether the first one's process runs.
        witness = tmp_path / "witness.out"
        second = pool.submit(
            "--gpus", "1", "--", PY, scripts["witness"], str(child["pid"]),
            str(child["start_ticks"]), str(witness),
        )  # fmt: skip
        if not daemon_up:
            pool.kill()
        os.kill(claim["supervisor_pid"], signal.SIGKILL)
        if not daemon_up:
            pool.start()
        done = pool.wait(first)
        assert (done.state, done.reason, done.exit_code) == ("FAILED", "NodeFail", None)
        cause = done.events[-1].cause
        assert "supervisor died" in cause and f"killed its process {child['pid']}" in cause
        assert not process_alive(child["pid"], child["start_ticks"])
        assert pool.wait(second).state == "SUCCEEDED"
        assert witness.read_text() == "gone"
    finally:
        pool.cleanup()


# -- 10. a job that ends while the daemon is down ------------------------------------------


def test_a_job_that_ends_while_the_daemon_is_down_keeps_its_true_end_time(
    pool: Pool, tmp_path: Path, scripts: dict[str, str]
) -> None:
    go = tmp_path / "go"
    job_id = pool.submit("--gpus", "2", "--", PY, scripts["until"], str(go), "0")
    pool.wait_state(job_id, "RUNNING")
    # RUNNING is stored before the launch (a daemon killed in between relaunches the job
    # when it restarts): wait until the job really runs, or no exit.json can come while
    # the daemon is down.
    job_file(pool, job_id, "child.json")
    pool.kill()
    go.touch()
    record = job_file(pool, job_id, "exit.json")
    restarted_at = time.time()
    pool.start()
    done = pool.wait(job_id)
    assert (done.state, done.exit_code) == ("SUCCEEDED", 0)
    assert done.end_time == record["end_time"] < restarted_at
    assert done.events[-1].time == record["end_time"]
    assert done.start_time <= done.end_time


# -- 6. a restart on fewer GPUs ------------------------------------------------------------


def test_a_job_on_gpus_gone_from_the_inventory_is_stopped_and_requeued(
    pool: Pool, tmp_path: Path, scripts: dict[str, str]
) -> None:
    runs = tmp_path / "runs.log"
    ids = [
        pool.submit("--gpus", "2", "--", PY, scripts["until"], str(tmp_path / f"go-{n}"), "0",
                    str(runs))
        for n in range(2)
    ]  # fmt: skip
    jobs = {j: pool.wait_state(j, "RUNNING") for j in ids}
    (moved,) = [j for j in ids if set(jobs[j].gpus) - {0, 1}]
    (kept,) = [j for j in ids if j != moved]
    before = job_file(pool, moved, "child.json")
    pool.kill()
    pool.gpus = "2xA100-80GB"  # GPUs 2 and 3 are gone
    pool.start()
    requeued = pool.wait_state(moved, "PENDING")
    assert requeued.restart_count == 1
    assert not process_alive(before["pid"], before["start_ticks"])
    history = [e.cause for e in requeued.events]
    missing = sorted(set(jobs[moved].gpus) - {0, 1})
    gone = f"GPU{'s' if len(missing) > 1 else ''} {','.join(map(str, missing))}"
    assert any(f"{gone} on {jobs[moved].node} " in c and "not in the pool" in c for c in history)
    assert any("requeued" in c for c in history), history
    assert f"job {moved}" in pool.daemon_log() and "not in the pool" in pool.daemon_log()
    # The job that runs on GPUs the pool still has keeps running, untouched.
    still = pool.client.job(kept)
    assert (still.state, still.gpus, still.restart_count) == ("RUNNING", (0, 1), 0)
    (tmp_path / f"go-{ids.index(kept)}").touch()
    assert pool.wait(kept).state == "SUCCEEDED"
    rerun = pool.wait_state(moved, "RUNNING")
    assert set(rerun.gpus) <= {0, 1} and rerun.restart_count == 1
    (tmp_path / f"go-{ids.index(moved)}").touch()
    assert pool.wait(moved).state == "SUCCEEDED"
    seen = [line.split() for line in runs.read_text().splitlines()]
    assert [(int(j), r) for j, r, _, _ in seen if int(j) == moved] == [(moved, "0"), (moved, "1")]
    assert [set(map(int, g.split(","))) <= {0, 1} for j, r, g, _ in seen if r == "1"] == [True]


# -- 4. a job that ends while the state disk is full ---------------------------------------


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A directory with a short path: the test reaches the daemon's socket through
    /proc/<pid>/root/<state dir>, and a Unix socket's path must fit in 107 bytes, which
    pytest's tmp_path (deeper under xdist's popen-gwN) does not promise."""
    made = Path(tempfile.mkdtemp(prefix="gpfull-", dir="/tmp"))
    yield made
    shutil.rmtree(made, ignore_errors=True)


class FullDiskPool(Pool):
    """A daemon whose state directory is a small tmpfs in a mount namespace of its own, so
    that the test can fill it for real (tests/private_tmpfs.py says why that way). The
    test reaches the state directory through /proc/<daemon pid>/root."""

    def __init__(self, root: Path, size: int) -> None:
        super().__init__(root, gpus="2xA100-80GB")
        self.real_state_dir = self.state_dir
        self.size = size

    def wrap(self, cmd: list[str]) -> list[str]:
        self.real_state_dir.mkdir(parents=True, exist_ok=True)
        return on_tmpfs(self.real_state_dir, self.size, cmd)

    def daemon_env(self) -> dict[str, str]:
        return {**self.env, "GPUPOOL_STATE_DIR": str(self.real_state_dir)}

    def started(self, pid: int) -> None:
        self.state_dir = view(pid, self.real_state_dir)
        self.client = Client(self.state_dir)

    def cleanup(self) -> None:
        # Through the daemon's view: stop what runs while the daemon is there to see it.
        if self.proc is not None and self.proc.poll() is None:
            self.kill_jobs()
        self.stop()


def test_a_job_that_ends_on_a_full_disk_keeps_its_exit_code(
    tmp_path: Path, short_tmp: Path, scripts: dict[str, str]
) -> None:
    pool = FullDiskPool(short_tmp / "pool", size=16 << 20).start()
    try:
        go, hold = tmp_path / "go", tmp_path / "hold"
        job_id = pool.submit("--gpus", "1", "--", PY, scripts["until"], str(go), "0")
        other = pool.submit("--gpus", "1", "--", PY, scripts["until"], str(hold), "0")
        pool.wait_state(job_id, "RUNNING")
        pool.wait_state(other, "RUNNING")
        child = job_file(pool, job_id, "child.json")
        supervisor = job_file(pool, job_id, "claim.json")["supervisor_pid"]
        filler = fill(pool.state_dir)
        go.touch()
        wait_for(lambda: not process_alive(child["pid"], child["start_ticks"]), 30, "job's end")
        # The engine polls running jobs every round (passes run only when one is due).
        tried, polls = write_syscalls(supervisor), pool.client.info().polls

        def exit_kept_and_job_running() -> bool:
            job = pool.client.job(job_id)
            assert job.state == "RUNNING", job.events
            return write_syscalls(supervisor) >= tried + 3 and (
                pool.client.info().polls >= polls + 3
            )

        wait_for(exit_kept_and_job_running, 60, "the supervisor to retry while polls run")
        # Requests that must write say why they cannot, in one line, and change nothing.
        for args in (("submit", "--gpus", "1", "--", "true"), ("cancel", str(other))):
            out = pool.cli(*args)
            assert out.returncode == 1, out
            assert len(out.stderr.splitlines()) == 1, out.stderr
            assert out.stderr.startswith("gpupool: the state disk is full"), out.stderr
        status, _, body = pool.client.request_raw("POST", f"/v1/jobs/{other}/cancel", {"user": "t"})
        answer = json.loads(body)
        assert (status, answer["error"]) == (507, "disk_full")
        assert answer["available_bytes"] < answer["needed_bytes"]
        assert answer["path"] == str(pool.real_state_dir)
        filler.unlink()
        done = pool.wait(job_id)
        assert (done.state, done.exit_code, done.reason) == ("SUCCEEDED", 0, "")
        assert [j.id for j in pool.client.jobs(include_finished=True)] == [job_id, other]
        assert pool.client.job(other).state == "RUNNING"  # the refused cancel did nothing
        hold.touch()
        assert pool.wait(other).state == "SUCCEEDED"
        leftovers = [p.name for p in (pool.state_dir / "jobs").glob("*/*.tmp-*")]
        assert leftovers == []
    finally:
        pool.cleanup()


def read_in_namespace(pool: Pool, db: Path) -> tuple[str, dict[str, int], int]:
    """SQLite's integrity check, the jobs (name -> id) and the count of first transitions of
    the database `db` as the daemon's mount namespace has it (its tmpfs lives as long as the
    daemon). SQLite resolves symbolic links, so /proc/PID/root/... would open the file
    outside the namespace: a forked child chroots into the daemon's root instead (root only)."""
    assert pool.proc is not None
    r, w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover  (the child reports through the pipe)
        code = 1
        try:
            os.close(r)
            os.chroot(f"/proc/{pool.proc.pid}/root")
            os.chdir("/")
            conn = sqlite3.connect(str(db), timeout=30)
            (check,) = conn.execute("PRAGMA integrity_check").fetchone()
            jobs = dict(conn.execute("SELECT name, id FROM jobs").fetchall())
            (count,) = conn.execute(
                "SELECT count(*) FROM transitions WHERE from_state IS NULL"
            ).fetchone()
            os.write(w, json.dumps([check, jobs, count]).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(child, 0)
    assert status == 0 and data, f"could not read {db} in the daemon's namespace"
    check, jobs, count = json.loads(data)
    return str(check), {str(k): int(v) for k, v in jobs.items()}, int(count)


def test_submissions_until_the_disk_is_full_are_refused_plainly_and_none_is_lost(
    short_tmp: Path,
) -> None:
    """The state disk fills up under a stream of submissions (SQLite grows on it): the one
    that does not fit is refused with 507 disk_full, the CLI says so in one line, and once
    space is freed the daemon goes on; every acknowledged job is intact,
    and the database passes SQLite's integrity check."""
    if os.geteuid() != 0:
        pytest.skip("reading the database inside the daemon's mount namespace needs root")
    pool = FullDiskPool(short_tmp / "pool", size=16 << 20).start()
    try:
        filler = fill(pool.state_dir, leave=2 << 20)
        ten_years = time.time() + 10 * 365 * 86400.0  # held: nothing is launched

        def submit(name: str) -> int:
            wire = {"name": name, "command": ["true"], "workdir": "/", "begin_time": ten_years}
            return pool.client.submit(wire, uuid.uuid4().hex, retry=False).id

        acknowledged: dict[str, int] = {}
        refusal: ApiError | None = None
        for n in range(20_000):  # 2 MiB of room: a few hundred submissions at most
            try:
                acknowledged[f"full-{n}"] = submit(f"full-{n}")
            except ApiError as exc:
                refusal = exc
                break
        assert refusal is not None, "the disk never filled up"
        assert (refusal.status, refusal.code) == (507, "disk_full"), refusal.body
        assert len(acknowledged) > 10
        out = pool.cli("submit", "--gpus", "1", "--", "true")
        assert out.returncode == 1, out
        (line,) = out.stderr.splitlines()
        assert line.startswith("gpupool: the state disk is full"), line
        assert "nothing was changed" in line
        filler.unlink()
        acknowledged["after"] = submit("after")  # the daemon goes on
        jobs = {j.name: j for j in pool.client.jobs(include_finished=True)}
        assert {n: j.id for n, j in jobs.items()} == acknowledged
        assert {j.state for j in jobs.values()} == {"PENDING"}
        # What the database itself holds, read beside the running daemon.
        integrity, stored, firsts = read_in_namespace(pool, pool.real_state_dir / "state.db")
        assert integrity == "ok"
        assert stored == acknowledged
        assert firsts == len(acknowledged)  # each job's first line of its history
        assert "Traceback" not in pool.daemon_log()
    finally:
        pool.cleanup()
