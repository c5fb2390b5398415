"""The Slurm backend's signal forwarding, run here without Slurm: the rendered batch script
run by bash, and node_launcher.py run by python, each signalled as Slurm signals them
(`--signal=B:USR1` and `scancel --batch` reach the batch shell; srun passes signals on to
the launchers). SIGUSR1, the checkpoint signal, reaches only processes that catch it; a
command that does not is not killed by it. The real cluster's tests are in
tests/integration/test_slurm_backend.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from test_slurm_render import LAUNCHER, req

from gpupool.backends.slurm.node_launcher import __file__ as launcher_file
from gpupool.backends.slurm.render import RunFiles, render
from gpupool.backends.slurm.settings import SlurmSettings

PY = sys.executable
DEADLINE_S = 30.0
NOT_PASSED_ON = "SIGUSR1 (the checkpoint signal) not passed on"

# A command that marks itself ready (DIR/ready-RANK), catching SIGUSR1 and SIGUSR2 when
# asked (`catch`): each writes DIR/got-SIG-RANK. It ends after SIGUSR1, or at its deadline.
JOB = """
import os, pathlib, signal, sys, time
d, catch = pathlib.Path(sys.argv[1]), sys.argv[2] == "catch"
rank = os.environ.get("RANK", "0")
if catch and (rank == "0" or len(sys.argv) < 4):  # with a 4th word, rank 0 only
    def got(signum, frame):
        (d / ("got-%s-%s" % (signal.Signals(signum).name, rank))).touch()
        if signum == signal.SIGUSR1:
            sys.exit(0)
    signal.signal(signal.SIGUSR1, got)
    signal.signal(signal.SIGUSR2, got)
(d / ("ready-" + rank)).touch()
time.sleep(60)
sys.exit(5)
"""


def wait_until(ready: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not ready():
        assert time.monotonic() < deadline, f"no {what} after {DEADLINE_S}s"
        time.sleep(0.02)


def start_script(tmp_path: Path, catch: bool) -> subprocess.Popen[str]:
    """The batch script of a single-process run, run by bash as slurmd would run it."""
    out = tmp_path / "out"
    out.mkdir()
    command = (PY, "-c", JOB, str(tmp_path), "catch" if catch else "no")
    sub = render(req(command=command), SlurmSettings(), "n", RunFiles(out), LAUNCHER)
    (out / "job.sh").write_text(sub.script)
    proc = subprocess.Popen(
        ["bash", str(out / "job.sh")], stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    wait_until((tmp_path / "ready-0").exists, "ready file")
    return proc


def test_script_passes_the_checkpoint_signal_to_a_command_that_catches_it(
    tmp_path: Path,
) -> None:
    proc = start_script(tmp_path, catch=True)
    proc.send_signal(signal.SIGUSR2)  # `scancel --batch --signal=USR2`: passed on as it is
    wait_until((tmp_path / "got-SIGUSR2-0").exists, "SIGUSR2 in the command's handler")
    proc.send_signal(signal.SIGUSR1)
    _, err = proc.communicate(timeout=DEADLINE_S)
    assert (tmp_path / "got-SIGUSR1-0").exists()
    assert proc.returncode == 0, err  # the handler's exit, not a death by SIGUSR1 (138)
    assert NOT_PASSED_ON not in err
    assert (tmp_path / "out" / "exit").read_text() == "0\n"


@pytest.mark.parametrize("first", [signal.SIGCONT, signal.SIGUSR1])
def test_the_checkpoint_signal_survives_slurms_sigcont_beside_it(
    tmp_path: Path, first: signal.Signals
) -> None:
    """Slurm's warning (`--signal=B:USR1@N`) is two RPCs, SIGCONT then SIGUSR1, that reach
    the batch shell together or in either order (seen in CI's slurmd logs). A bash that
    traps SIGCONT loses a SIGUSR1 trap arriving with it (bash 5.2), and the checkpoint
    never came: the script traps no SIGCONT."""
    proc = start_script(tmp_path, catch=True)
    second = signal.SIGUSR1 if first is signal.SIGCONT else signal.SIGCONT
    os.kill(proc.pid, first)
    os.kill(proc.pid, second)
    _, err = proc.communicate(timeout=DEADLINE_S)
    assert (tmp_path / "got-SIGUSR1-0").exists(), err
    assert proc.returncode == 0, err


def test_script_keeps_the_checkpoint_signal_from_a_command_that_does_not(
    tmp_path: Path,
) -> None:
    proc = start_script(tmp_path, catch=False)
    proc.send_signal(signal.SIGUSR1)
    assert proc.stderr is not None
    line = proc.stderr.readline()  # the shell says it kept the signal back
    assert NOT_PASSED_ON in line
    proc.send_signal(signal.SIGTERM)  # Slurm's end of the job: passed on to the command
    proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 128 + signal.SIGTERM  # alive until then: not 138 (SIGUSR1)


def test_launcher_passes_the_checkpoint_signal_only_to_ranks_that_catch_it(
    tmp_path: Path,
) -> None:
    """Rank 0 catches SIGUSR1 and ends on it, rank 1 does not: rank 1 runs on until the
    SIGTERM that follows, which makes the launcher's code 143 (138 had SIGUSR1 killed it)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    argv = [PY, "-I", "-S", launcher_file, "--nproc-per-node", "2", "--nnodes", "1",
            "--grace", "5", "--rank-log-dir", str(logs), "--",
            PY, "-c", JOB, str(tmp_path), "catch", "rank0"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    wait_until(lambda: all((tmp_path / f"ready-{r}").exists() for r in (0, 1)), "ranks ready")
    proc.send_signal(signal.SIGUSR1)
    wait_until((tmp_path / "got-SIGUSR1-0").exists, "SIGUSR1 in rank 0's handler")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 128 + signal.SIGTERM, out
    assert not (tmp_path / "got-SIGUSR1-1").exists()
    assert NOT_PASSED_ON not in out  # one rank caught it


def test_a_signal_before_the_command_has_started_is_passed_on_when_it_starts(
    tmp_path: Path,
) -> None:
    """`scancel` (SIGTERM to the batch shell) in the moment before the script has started
    the command (a distributed run's setup asks scontrol first): the command gets it as
    soon as it starts, it does not run on to its limit. The window is widened here by a
    gate put before the command's line."""
    out = tmp_path / "out"
    out.mkdir()
    command = (PY, "-c", JOB, str(tmp_path), "no")
    script = render(req(command=command), SlurmSettings(), "n", RunFiles(out), LAUNCHER).script
    gate, waiting = tmp_path / "gate", tmp_path / "waiting"
    hold = f"touch {waiting}; while [ ! -e {gate} ]; do sleep 0.01; done\nsetsid "
    assert script.count("\nsetsid ") == 1
    (out / "job.sh").write_text(script.replace("\nsetsid ", "\n" + hold))
    proc = subprocess.Popen(
        ["bash", str(out / "job.sh")], stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    wait_until(waiting.exists, "the script in its setup")
    proc.send_signal(signal.SIGTERM)
    gate.touch()
    _, err = proc.communicate(timeout=DEADLINE_S)  # the command sleeps 60 s if not told
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert (out / "exit").read_text().strip() == str(128 + signal.SIGTERM)
