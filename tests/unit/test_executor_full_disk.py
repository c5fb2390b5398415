"""A job that ends while the state disk is full: its exit is kept, not lost (Linux only).

The disk is really full: the job directory is a small tmpfs in a mount namespace of the
supervisor's own (see tests/private_tmpfs.py for why that way).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from executor_helpers import wait_for
from private_tmpfs import fill, on_tmpfs, view, write_syscalls

from gpupool.executor.files import atomic_write_json, create_json, process_alive, read_json
from gpupool.executor.local import SUPERVISOR
from gpupool.executor.records import read_exit_record

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

PY = sys.executable
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
UNTIL_THEN_EXIT_0 = """
import os, sys, time
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
"""
# The supervisor reads launch.json from its job directory, which is on the tmpfs mounted
# just before: copy it in, then become the supervisor (same pid, so /proc/PID/root works).
COPY_THEN_SUPERVISE = 'cp "$0" "$1/launch.json" && exec "$2" -I -S "$3" "$1"'


def _in_dir(dirfd: int, name: str) -> str:
    # Through a descriptor: the tmpfs stays readable after the namespace is gone.
    return f"/proc/self/fd/{dirfd}/{name}"


def _supervise_on_a_1mib_disk(
    jobdir: Path, staged: Path, job_command: list[str]
) -> subprocess.Popen[bytes]:
    """The supervisor of a job running `job_command`, its job directory on a 1 MiB tmpfs."""
    spec = {
        "job_id": 1,
        "command": job_command,
        "env": ENV,
        "workdir": "/",
        "time_limit_s": None,
        "grace_s": 1.0,
        "notify_socket": None,
        "user": None,
        "umask": None,
    }
    staged.write_text(json.dumps(spec))
    command = ["sh", "-c", COPY_THEN_SUPERVISE, str(staged), str(jobdir), PY, str(SUPERVISOR)]
    return subprocess.Popen(on_tmpfs(jobdir, 1 << 20, command), stdin=subprocess.DEVNULL)


def _clean_up(sup: subprocess.Popen[bytes], child: dict[str, int], dirfd: int) -> None:
    """What a test left running or open, whatever it got to: the supervisor, the job, the
    job directory's descriptor."""
    if sup.poll() is None:
        sup.kill()
        sup.wait()
    if child and process_alive(child["pid"], child["start_ticks"]):
        os.killpg(child["pgid"], signal.SIGKILL)
    if dirfd >= 0:
        os.close(dirfd)


def test_an_exit_on_a_full_disk_is_kept_until_it_can_be_written(tmp_path: Path) -> None:
    jobdir, go, staged = tmp_path / "job", tmp_path / "go", tmp_path / "launch.json"
    jobdir.mkdir()
    sup = _supervise_on_a_1mib_disk(jobdir, staged, [PY, "-c", UNTIL_THEN_EXIT_0, str(go)])
    dirfd = -1
    child: dict[str, int] = {}
    try:
        inside = view(sup.pid, jobdir)
        child = wait_for(lambda: read_json(inside / "child.json"), 30, "the job's start")
        dirfd = os.open(inside, os.O_RDONLY | os.O_DIRECTORY)
        filler = fill(inside)
        go.touch()
        wait_for(lambda: not process_alive(child["pid"], child["start_ticks"]), 30, "job's end")
        tried = write_syscalls(sup.pid)

        def retried_and_still_waiting() -> bool:
            assert sup.poll() is None, "the supervisor died with the exit unrecorded"
            assert "exit.json" not in os.listdir(dirfd)
            return write_syscalls(sup.pid) >= tried + 3

        wait_for(retried_and_still_waiting, 30, "three more attempts to record the exit")
        freed_at = time.time()
        filler.unlink()
        exit_path = Path(_in_dir(dirfd, "exit.json"))
        rec = wait_for(lambda: read_exit_record(exit_path), 30, "exit.json once space is back")
        assert (rec.exit_code, rec.signal, rec.reason) == (0, None, "exited")
        assert rec.end_time < freed_at  # when the job ended, not when the record was written
        assert sup.wait(30) == 0
        assert sorted(os.listdir(dirfd)) == [
            "child.json",
            "claim.json",
            "exit.json",
            "launch.json",
            "output.log",
        ]  # no temporary left behind by the failed attempts
    finally:
        _clean_up(sup, child, dirfd)


# A job that writes a line every 20 ms until GO exists, counting in COUNT (outside the
# tmpfs) the writes a full disk refused.
WRITES_UNTIL = """
import os, sys, time
refused = 0
while not os.path.exists(sys.argv[1]):
    try:
        os.write(1, b"a line of output\\n")
    except OSError:
        refused += 1
        with open(sys.argv[2], "w") as f:
            f.write(str(refused))
    time.sleep(0.02)
"""


def test_output_lost_to_a_full_disk_is_said_in_the_log_and_the_exit_record(
    tmp_path: Path,
) -> None:
    jobdir, go, staged = tmp_path / "job", tmp_path / "go", tmp_path / "launch.json"
    refused = tmp_path / "refused"
    jobdir.mkdir()
    sup = _supervise_on_a_1mib_disk(jobdir, staged, [PY, "-c", WRITES_UNTIL, str(go), str(refused)])
    dirfd = -1
    child: dict[str, int] = {}
    try:
        inside = view(sup.pid, jobdir)
        child = wait_for(lambda: read_json(inside / "child.json"), 30, "the job's start")
        dirfd = os.open(inside, os.O_RDONLY | os.O_DIRECTORY)
        log = Path(_in_dir(dirfd, "output.log"))
        wait_for(lambda: log.stat().st_size > 0, 30, "the job's first output")
        full_from = time.time()
        filler = fill(inside)
        wait_for(lambda: refused.exists() and int(refused.read_text() or 0) >= 3, 30, "refusals")
        go.touch()  # the job ends while the disk is still full
        wait_for(lambda: not process_alive(child["pid"], child["start_ticks"]), 30, "job's end")
        tried = write_syscalls(sup.pid)
        wait_for(lambda: write_syscalls(sup.pid) >= tried + 2, 30, "the exit record's retries")
        filler.unlink()
        rec = wait_for(lambda: read_json(Path(_in_dir(dirfd, "exit.json"))), 30, "exit.json")
        assert sup.wait(30) == 0
        ((start, end),) = rec["output_lost"]
        assert full_from <= start <= end <= rec["end_time"]
        lines = log.read_text().splitlines()
        lost = [line for line in lines if line.startswith("gpupool: output lost")]
        assert len(lost) == 1, lines[-5:]
        assert "the disk of this log was full" in lost[0]
        assert lost[0].endswith("what the job wrote then is not in this log"), lost[0]
    finally:
        _clean_up(sup, child, dirfd)


# -- the daemon's own writes: nothing half-written is left when a write fails -------------


def _write_failing(path: Path, how: str) -> str:
    """Run atomic_write_json or create_json in a child whose file-size limit makes every
    write past 8 bytes fail (EFBIG, as a full disk makes them fail with ENOSPC)."""
    code = f"""
import errno, json, resource, signal, sys
from pathlib import Path
from gpupool.executor.files import atomic_write_json, create_json
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (8, resource.RLIM_INFINITY))
try:
    {how}(Path({str(path)!r}), {{"a": "x" * 100}})
except OSError as exc:
    print(errno.errorcode[exc.errno])
"""
    done = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("how", ["atomic_write_json", "create_json"])
def test_a_failed_write_leaves_no_temporary_and_no_torn_file(tmp_path: Path, how: str) -> None:
    path = tmp_path / "exit.json"
    assert _write_failing(path, how) == "EFBIG"
    assert list(tmp_path.iterdir()) == []
    # Without the limit the same call works: the failed write, not the call, was refused.
    if how == "create_json":
        assert create_json(path, {"a": 1})
    else:
        atomic_write_json(path, {"a": 1})
    assert read_json(path) == {"a": 1}
