"""`gpupool shell`: a shell on this box inside an allocation, as `salloc` / `srun --pty bash`.

It queues like any job (its position and why it waits shown meanwhile); once it runs, your
shell (or the command after `--`) starts here with the job's GPUs: CUDA_VISIBLE_DEVICES,
NVIDIA_VISIBLE_DEVICES and the GPUPOOL_* variables the pool gives every job. Exiting the
shell ends the allocation.

How the allocation is held: the job's own process is a holder (`HOLDER` below) that writes
its environment to a file in a private directory of yours, then reads a FIFO there until
every writer closed it. This command opens the FIFO once the job runs and keeps it open
while the shell runs: when it exits, or is killed however hard, the kernel closes it, the
holder reads end-of-file and the job ends (SUCCEEDED). If the pool ends the job first
(its time limit, a cancel), the shell is told with SIGHUP, as salloc does.
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from gpupool.cli.commands import OnPool, Parents, Subparsers
from gpupool.cli.session_advice import add_preemptible_flag, submit_session

if TYPE_CHECKING:
    from gpupool.client import Client, JobView

# $1: where to write the environment; $2: the FIFO to hold on to.
HOLDER = 'env > "$1.tmp" && mv "$1.tmp" "$1" && exec cat "$2" > /dev/null'
POOL_VARIABLES = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
STARTUP_S = 60.0  # from RUNNING to the holder's environment file
POLL_S = 1.0
HANGUP_GRACE_S = 10.0  # from SIGHUP to SIGKILL of a shell the pool closed


def register(sub: Subparsers, parents: Parents) -> None:
    p = sub.add_parser(
        "shell",
        parents=[parents.common],
        help="a shell here with GPUs from the pool (as salloc); exit it to give them back",
        description="gpupool shell [--gpus N] [flags] [-- CMD ARGS...]: queue an interactive "
        "allocation, then run your shell (or CMD) on this machine with its GPUs.",
    )
    p.add_argument("--gpus", default="1", help="GPUs (default 1; 0.5 shares one by memory)")
    p.add_argument("--gpu-type", help="GPU model, e.g. A100-80GB")
    p.add_argument(
        "--gpu-memory", help="share one GPU: this much of its memory, e.g. 20GiB or 20GB (10^9 B)"
    )
    p.add_argument("--cpus", help="CPU cores")
    p.add_argument("--mem", help="host memory, e.g. 32GB")
    p.add_argument("--time", help="time limit, e.g. 4h (default: the pool's)")
    p.add_argument("--name", default="shell", help="job name (default: shell)")
    p.add_argument("--project", help="project (team) to charge")
    p.add_argument(
        "--priority", default="interactive", help="priority class (default: interactive)"
    )
    add_preemptible_flag(p, "the shell is closed and its job ends")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS (default: $SHELL)")
    p.set_defaults(handler=OnPool(cmd_shell))


def cmd_shell(client: Client, args: argparse.Namespace) -> int:
    from gpupool.cli.submit import build_wire_spec, spec_error_text
    from gpupool.spec import SpecError

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    shell = command or [os.environ.get("SHELL") or "/bin/sh"]
    place = Path(tempfile.mkdtemp(prefix="gpupool-shell-"))  # 0700, yours
    try:
        env_file, fifo = place / "env", place / "alive"
        os.mkfifo(fifo, 0o600)
        spec_args = argparse.Namespace(
            **{k: getattr(args, k, None) for k in vars(args)},
        )
        spec_args.command = ["sh", "-c", HOLDER, "gpupool-shell", str(env_file), str(fifo)]
        spec_args.spec_file, spec_args.env, spec_args.workdir = None, [], None
        for absent in ("begin", "grace"):
            setattr(spec_args, absent, None)
        try:
            wire = build_wire_spec(spec_args)
        except SpecError as exc:
            print(spec_error_text(exc, None), file=sys.stderr)
            return 2
        # Ctrl-C while it waits cancels the request: so even when this process was started
        # with SIGINT ignored (a script's background job passes SIG_IGN on through exec,
        # and Python then raises no KeyboardInterrupt).
        if sys.stdin.isatty():
            signal.signal(signal.SIGINT, signal.default_int_handler)
        job = submit_session(client, wire, "shell")
        if job is None:
            return 2
        print(f"gpupool: job {job.id} queued for an interactive shell", file=sys.stderr)
        return _session(client, job.id, env_file, fifo, shell)
    finally:
        shutil.rmtree(place, ignore_errors=True)


def _session(client: Client, job_id: int, env_file: Path, fifo: Path, shell: list[str]) -> int:
    from gpupool.cli.jobs import final_line

    try:
        job = _wait_running(client, job_id)
        if job is None:
            return 1
        held = _hold(client, job_id, env_file, fifo)
    except KeyboardInterrupt:
        client.cancel(job_id)
        print(f"\ngpupool: job {job_id} cancelled", file=sys.stderr)
        return 130
    if held is None:
        print(f"gpupool: {final_line(client.job(job_id))}", file=sys.stderr)
        return 1
    fd, job_env = held
    try:
        gpus = ",".join(map(str, job.gpus)) or "none"
        print(
            f"gpupool: job {job_id} running on {job.node} GPUs {gpus}; exit the shell to "
            "give them back",
            file=sys.stderr,
        )
        return _run_shell(client, job_id, shell, job_env, job.restart_count)
    finally:
        os.close(fd)  # the holder reads end-of-file: the job ends


def _wait_running(client: Client, job_id: int) -> JobView | None:
    """The job once RUNNING, saying meanwhile where it stands in the queue and why; None
    (after saying so) if it ended first.

    On a terminal the status is one line, rewritten in place (carriage return, the line,
    erase to its end), with the cursor left at its end: a Ctrl-C's `^C` echoes after it,
    and whatever is printed next (the job running or ended, or cancelled: `_session`)
    starts on a new line below it (issue 30, item 22). Elsewhere, a line per change."""
    from gpupool.cli.jobs import final_line

    said = ""
    tty = sys.stderr.isatty()
    while True:
        job = client.job(job_id)
        if job.state.value == "RUNNING" or job.state.terminal:
            if said and tty:
                print(file=sys.stderr)  # below the status line, which stays as it was
            if job.state.value == "RUNNING":
                return job
            print(f"gpupool: {final_line(job)}", file=sys.stderr)
            return None
        line = _waiting_line(client, job)
        if line != said:
            if tty:
                print(f"\rgpupool: {line}\033[K", end="", file=sys.stderr, flush=True)
            else:
                print(f"gpupool: {line}", file=sys.stderr, flush=True)
            said = line
        time.sleep(POLL_S)


def _waiting_line(client: Client, job: JobView) -> str:
    """'queued: 3 of 12 waiting (Resources: node vm: needs 2 GPUs, 0 free)'."""
    page = client.job_page(states=["PENDING"], order="queue", limit=500)
    ids = [j.id for j in page.jobs]
    where = f"{ids.index(job.id) + 1} of {page.total}" if job.id in ids else f"? of {page.total}"
    why = f" ({job.reason}: {job.why})" if job.reason else ""
    return f"queued: {where} waiting{why}"


def _hold(
    client: Client, job_id: int, env_file: Path, fifo: Path
) -> tuple[int, dict[str, str]] | None:
    """The FIFO's write end, open (the allocation held while it is), and the job's
    environment; None if the job ended before its holder was there."""
    deadline = time.monotonic() + STARTUP_S
    while True:
        if env_file.exists():
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                return fd, _read_env(env_file)
            except OSError as exc:
                if exc.errno != errno.ENXIO:  # ENXIO: the holder has not opened it yet
                    raise
        if client.job(job_id).state.terminal or time.monotonic() > deadline:
            return None
        time.sleep(0.05)


def _read_env(path: Path) -> dict[str, str]:
    """The variables the pool set for the job (a file of NAME=value lines written by `env`;
    a value with a newline is cut there: the pool's own values have none)."""
    found = {}
    for line in path.read_text(errors="replace").splitlines():
        name, sep, value = line.partition("=")
        if sep and (name in POOL_VARIABLES or name.startswith("GPUPOOL_")):
            found[name] = value
    return found


def _run_shell(
    client: Client, job_id: int, shell: list[str], job_env: dict[str, str], restarts: int
) -> int:
    """Run the shell in the foreground with the job's variables; SIGHUP to it if the pool
    ends the job first, or preempts it (a `--preemptible` session whose GPUs their owner took
    back: `restarts` was its restart count when it started), and SIGKILL if it still runs
    `HANGUP_GRACE_S` later (the GPUs are no longer its). A preempted session's job is
    cancelled, not left requeued: nobody would hold it when it ran again. The shell's exit
    code is this command's; when the pool closed it, 129 (128 + SIGHUP, as a hung-up shell
    reports), whatever the shell itself returned."""
    env = {**os.environ, **job_env, "GPUPOOL_SHELL_JOB": str(job_id)}
    try:
        child = subprocess.Popen(shell, env=env)
    except OSError as exc:
        print(f"gpupool: cannot run {shell[0]}: {exc.strerror}", file=sys.stderr)
        return 127
    done = threading.Event()
    closed = threading.Event()  # the pool ended or preempted the session: we hung up

    def hang_up() -> None:
        closed.set()
        child.send_signal(signal.SIGHUP)
        try:
            child.wait(HANGUP_GRACE_S)
        except subprocess.TimeoutExpired:
            child.kill()

    def watch() -> None:
        while not done.wait(2.0):
            try:
                job = client.job(job_id)
            except Exception:  # noqa: BLE001  (a daemon restart: ask again)
                continue
            if job.state.terminal:
                print(
                    f"\ngpupool: job {job_id} ended ({job.state.value}): its GPUs are no "
                    "longer yours; closing the shell",
                    file=sys.stderr,
                )
                hang_up()
                return
            if job.state.value != "RUNNING" or job.restart_count != restarts:
                print(
                    f"\ngpupool: job {job_id} was preempted: its owner took the borrowed "
                    "GPUs back; closing the shell (the job is cancelled, not requeued)",
                    file=sys.stderr,
                )
                try:
                    client.cancel(job_id)
                except Exception:  # noqa: BLE001  (said; the job is not ours to run again)
                    pass
                hang_up()
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the shell's
    try:
        code = child.wait()
        if closed.is_set():
            return 128 + signal.SIGHUP
        return code if code >= 0 else 128 - code  # a signal, as shells report it
    finally:
        signal.signal(signal.SIGINT, previous)
        done.set()
