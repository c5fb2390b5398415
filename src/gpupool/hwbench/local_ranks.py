"""A multi-rank benchmark's ranks started on this machine, when no launcher started them.

`gpupool submit --distributed torchrun` starts a job's ranks with torchrun's environment
(executor/rank_launcher.py, docs/distributed.md); a benchmark run alone (`gpupool bench
allreduce` on a workstation) starts them itself here, the same way: N processes of
``python -m MODULE ARGV...``, each with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
NODE_RANK, MASTER_ADDR=127.0.0.1 and a free MASTER_PORT (the variables rank_launcher's
`rank_env` sets; hwbench may not import the executor), so a rank runs the same code alone
as in a pool job. Rank 0 reports progress as JSON lines on the fd named by PROGRESS_FD_ENV.

A rank that fails stops the others (SIGTERM to each rank's process group, a grace, SIGKILL)
and `run_ranks` raises `RanksFailed` with that rank's exit code and the end of its output.
Standard library only.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import IO

from gpupool.hwbench.result import Progress

PROGRESS_FD_ENV = "GPUPOOL_BENCH_PROGRESS_FD"  # set for rank 0 only
GRACE_S = 5.0
TAIL_CHARS = 4000


class RanksFailed(RuntimeError):
    """A rank exited non-zero (or the ranks ran past their time): the message says which."""

    def __init__(self, message: str, rank: int | None, exit_code: int | None) -> None:
        super().__init__(message)
        self.rank = rank
        self.exit_code = exit_code


class PipeProgress:
    """Rank 0's `Progress`: one JSON object a line on `fd`, relayed by the starting process."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def _send(self, event: Mapping[str, object]) -> None:
        data = (json.dumps(event) + "\n").encode()
        try:
            while data:
                data = data[os.write(self.fd, data) :]
        except OSError:
            pass  # the starting process is gone: the measurement goes on without a bar

    def start(self, total: int, what: str) -> None:
        self._send({"start": int(total), "what": what})

    def advance(self, steps: int = 1) -> None:
        self._send({"advance": int(steps)})


def progress_from_env(env: Mapping[str, str] = os.environ) -> PipeProgress | None:
    """Rank 0's pipe to the process that started the ranks, when there is one."""
    fd = env.get(PROGRESS_FD_ENV)
    return PipeProgress(int(fd)) if fd and fd.isdigit() else None


def relay(line: bytes, progress: Progress) -> None:
    """One event of `PipeProgress`, told to `progress`; a line that is not one is ignored."""
    try:
        event = json.loads(line)
    except ValueError:
        return
    if not isinstance(event, dict):
        return
    start, advance = event.get("start"), event.get("advance")
    if isinstance(start, int):
        progress.start(start, str(event.get("what", "")))
    elif isinstance(advance, int):
        progress.advance(advance)


def free_port() -> int:
    """A TCP port free now on 127.0.0.1 (bound to port 0, as torchrun chooses one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_env(base: Mapping[str, str], rank: int, world: int, port: int) -> dict[str, str]:
    """Rank `rank` of `world` on this one node, as rank_launcher.rank_env makes it."""
    env = dict(base)
    env.update(
        {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "WORLD_SIZE": str(world),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(world),
            "NODE_RANK": "0",
            "GROUP_RANK": "0",
        }
    )
    if world > 1:
        env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _tail(log: IO[bytes]) -> str:
    log.flush()
    size = log.seek(0, os.SEEK_END)
    log.seek(max(0, size - TAIL_CHARS))
    return log.read().decode(errors="replace")


def _stop(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to every live rank's group, GRACE_S, SIGKILL; then reap them all."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
        deadline = time.monotonic() + GRACE_S
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            time.sleep(0.05)
    for p in procs:
        p.wait()


def run_ranks(
    module: str,
    argv: Sequence[str],
    world: int,
    progress: Progress,
    timeout_s: float,
) -> None:
    """Runs ``python -m module argv`` as ranks 0..world-1 here and waits for all of them.

    Returns when every rank exited 0; raises RanksFailed naming the first that did not
    (the others stopped), or when they run past `timeout_s`.
    """
    port = free_port()
    r, w = os.pipe2(os.O_CLOEXEC)
    procs: list[subprocess.Popen[bytes]] = []
    logs: list[IO[bytes]] = []
    try:
        for rank in range(world):
            env = rank_env(os.environ, rank, world, port)
            env.pop(PROGRESS_FD_ENV, None)
            fds: tuple[int, ...] = ()
            if rank == 0:
                env[PROGRESS_FD_ENV] = str(w)
                fds = (w,)
            log = tempfile.TemporaryFile(prefix=f"gpupool-rank-{rank}-")
            logs.append(log)
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", module, *argv],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=fds,
                    process_group=0,  # its own group, so a stop reaches what it started
                )
            )
        os.close(w)
        w = -1
        _wait(procs, logs, r, progress, time.monotonic() + timeout_s)
    finally:
        if w >= 0:
            os.close(w)
        os.close(r)
        if any(p.poll() is None for p in procs):
            _stop(procs)
        for opened in logs:
            opened.close()


def _wait(
    procs: Sequence[subprocess.Popen[bytes]],
    logs: Sequence[IO[bytes]],
    r: int,
    progress: Progress,
    deadline: float,
) -> None:
    pending = b""
    pipe_open = True
    while True:
        if pipe_open:
            ready, _, _ = select.select([r], [], [], 0.2)
            if ready:
                chunk = os.read(r, 65536)
                pipe_open = bool(chunk)
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    relay(line, progress)
        else:
            time.sleep(0.05)
        for rank, p in enumerate(procs):
            code = p.poll()
            if code is not None and code != 0:
                _stop(procs)
                how = f"was killed by signal {-code}" if code < 0 else f"exited with {code}"
                raise RanksFailed(
                    f"rank {rank} of {len(procs)} {how}; its output ends:\n" + _tail(logs[rank]),
                    rank,
                    128 - code if code < 0 else code,  # as a shell shows a signal death
                )
        if not pipe_open and all(p.poll() == 0 for p in procs):
            return
        if time.monotonic() > deadline:
            _stop(procs)
            raise RanksFailed(
                f"the {len(procs)} ranks ran past their time; rank 0's output ends:\n"
                + _tail(logs[0]),
                None,
                None,
            )
