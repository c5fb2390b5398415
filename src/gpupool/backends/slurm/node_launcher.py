"""One node's ranks of a distributed Slurm run: started once per node by the batch
script's `srun --ntasks-per-node=1` (render.py), on the compute node, with the cluster's
python (`launcher_python`, 3.7 or newer): standard library only, and nothing of gpupool imported.

``python3 -I -S node_launcher.py --nproc-per-node N --nnodes M --grace G
--rank-log-dir DIR -- CMD ARGS...``

- NODE_RANK is SLURM_NODEID; MASTER_ADDR and MASTER_PORT come from the batch script's
  environment. Local rank L is rank NODE_RANK * N + L, started with torchrun's environment
  (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, NODE_RANK, GROUP_RANK) in its own process
  group; OMP_NUM_THREADS defaults to 1 when N > 1, as under torchrun.
- Each rank's output (stdout and stderr as written) goes to DIR/rank-K.log, and every line
  to this launcher's stdout (the job's output file) with a ``[rank K] `` prefix.
- When a rank fails, the others get SIGTERM, `--grace` seconds, SIGKILL, and the launcher
  exits with the failed rank's code (128+N for signal N). The signals srun passes on (Slurm's
  SIGTERM, `scancel --signal`) go to every rank's process group as they are, except SIGUSR1,
  the checkpoint signal: only a rank's processes that catch it get it (SigCgt in
  /proc/PID/status), so a rank that does not checkpoint is not killed by it (as the batch
  script does for a single-process run, render.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO

_lock = threading.Lock()
# What srun passes on to this launcher, passed on to every rank's group in turn.
FORWARDED = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGTERM, signal.SIGALRM, signal.SIGCONT)  # fmt: skip


def _pump(rank: int, stream: IO[bytes], log_path: str) -> None:
    prefix = f"[rank {rank}] ".encode()
    out = sys.stdout.buffer
    with open(log_path, "ab", buffering=0) as log:
        for line in iter(stream.readline, b""):
            log.write(line)
            with _lock:
                out.write(prefix + line + (b"" if line.endswith(b"\n") else b"\n"))
                out.flush()


def _catches(pid: int, signum: int) -> bool:
    """Does process `pid` catch `signum`? (bit signum-1 of SigCgt in /proc/PID/status)"""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (OSError, IndexError, ValueError):
        pass
    return False


def _group_members(pgids: set[int]) -> list[int]:
    """The processes whose process group is one of `pgids`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[2]) in pgids:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return found


def _checkpoint(pgids: set[int]) -> None:
    """SIGUSR1 to each process of the ranks' groups that catches it; ignored otherwise."""
    sent = False
    for pid in _group_members(pgids):
        if _catches(pid, signal.SIGUSR1):
            try:
                os.kill(pid, signal.SIGUSR1)
                sent = True
            except (ProcessLookupError, PermissionError):
                pass
    if not sent:
        msg = b"gpupool: SIGUSR1 (the checkpoint signal) not passed on: no rank catches it\n"
        with _lock:  # held only by the pump threads, never by this (the main) thread
            sys.stdout.buffer.write(msg)
            sys.stdout.buffer.flush()


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def main(argv: list[str]) -> int:
    cut = argv.index("--")
    opts = dict(zip(argv[:cut:2], argv[1:cut:2]))  # noqa: B905 (python >= 3.7 on the nodes)
    cmd = argv[cut + 1 :]
    nproc = int(opts["--nproc-per-node"])
    nnodes = int(opts["--nnodes"])
    grace = float(opts.get("--grace", "10"))
    log_dir = opts["--rank-log-dir"]
    node_rank = int(os.environ.get("SLURM_NODEID", "0"))
    procs: list[subprocess.Popen[bytes]] = []
    pumps = []

    def forward(signum: int, frame: object = None) -> None:
        if signum == signal.SIGUSR1:
            _checkpoint({p.pid for p in procs})
            return
        for p in procs:
            try:
                os.killpg(p.pid, signum)
            except (ProcessLookupError, PermissionError):
                pass

    for sig in FORWARDED:
        signal.signal(sig, forward)
    for local in range(nproc):
        rank = node_rank * nproc + local
        env = dict(os.environ)
        env.update(
            RANK=str(rank), LOCAL_RANK=str(local), WORLD_SIZE=str(nproc * nnodes),
            LOCAL_WORLD_SIZE=str(nproc), NODE_RANK=str(node_rank), GROUP_RANK=str(node_rank),
        )  # fmt: skip
        if nproc > 1:
            env.setdefault("OMP_NUM_THREADS", "1")
        try:
            p = subprocess.Popen(
                cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,  # noqa: S603
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            print(f"gpupool: rank {rank} not started: {cmd[0]}: {exc.strerror}", flush=True)
            forward(signal.SIGKILL, None)
            return 127 if isinstance(exc, FileNotFoundError) else 126
        procs.append(p)
        t = threading.Thread(target=_pump, args=(rank, p.stdout, f"{log_dir}/rank-{rank}.log"))
        t.start()
        pumps.append(t)
    failed: int | None = None
    kill_at: float | None = None
    while any(p.poll() is None for p in procs):
        for local, p in enumerate(procs):
            code = p.poll()
            if code not in (None, 0) and failed is None:
                failed = _exit_code(code)
                print(
                    f"gpupool: rank {node_rank * nproc + local} exited with code {failed}: "
                    f"stopping the other ranks", flush=True,
                )  # fmt: skip
                forward(signal.SIGTERM, None)
                kill_at = time.monotonic() + grace
        if kill_at is not None and time.monotonic() >= kill_at:
            forward(signal.SIGKILL, None)
            kill_at = None
        time.sleep(0.05)
    for t in pumps:
        t.join(timeout=5)
    if failed is not None:
        return failed
    codes = [_exit_code(p.returncode) for p in procs if p.returncode != 0]
    return codes[0] if codes else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
