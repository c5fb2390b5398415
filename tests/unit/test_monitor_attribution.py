"""Whose a GPU process is (monitor/attribution.py): the job whose session it runs in."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from gpupool.monitor.attribution import job_of, session_of

SLEEP = "import time; time.sleep(60)"


def test_a_process_and_its_children_belong_to_the_job_whose_session_they_run_in(
    tmp_path: Path,
) -> None:
    # The job's main process leads a new session (as the supervisor starts it); a child it
    # starts stays in that session, whatever its command name (even one holding ") ").
    odd = tmp_path / "a) b (c"
    shutil.copy(sys.executable, odd)
    odd.chmod(0o755)
    leader = subprocess.Popen(
        [sys.executable, "-c",
         f"import subprocess, time; subprocess.Popen([{str(odd)!r}, '-c', {SLEEP!r}]); "
         "time.sleep(60)"],
        start_new_session=True,
    )  # fmt: skip
    try:
        child = _wait_for_child(leader.pid)
        assert session_of(leader.pid) == session_of(child) == leader.pid
        jobs = {leader.pid: 17}
        assert job_of(leader.pid, jobs) == job_of(child, jobs) == 17
        assert job_of(os.getpid(), jobs) is None  # another session: foreign
    finally:
        os.killpg(leader.pid, 9)
        leader.wait()


def test_a_process_that_is_gone_belongs_to_no_job() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    gone.wait()
    assert session_of(gone.pid) is None
    assert job_of(gone.pid, {gone.pid: 1}) is None


def _wait_for_child(pid: int) -> int:
    from executor_helpers import wait_for

    def child() -> int | None:
        try:
            found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return None
        return int(found[0]) if found else None

    found: int = wait_for(child, what=f"a child of {pid}")
    return found
