"""NVIDIA MPS (Multi-Process Service) for the GPUs that fractional jobs share: a pool setting.

Without MPS, a sharer that uses more GPU memory than its grant is stopped by the GPU monitor
after `--memory-overuse-grace` (docs/monitoring.md). With MPS every sharer is an MPS client
with a pinned device memory limit: an allocation past its grant fails inside the job
(cudaMalloc returns out of memory) and the other sharers never feel it. docs/mps.md has the
setting, the variables and the limits NVIDIA documents.

One control daemon per shared GPU (NVIDIA's "control daemon and server started per GPU"
setup), with its pipe and log directories under the state directory. Its command lines and a
sharer's environment are pure functions; `MpsControl` starts a GPU's daemon for its first
sharer and stops it after the last one, counting sharers by job id.

Contract with the caller (the executor):
- `acquire` before a sharer's launch. None: MPS is up on that GPU, launch the job with
  `sharer_env(...)`. A string: a problem to log; the job runs without MPS (as the CUDA driver
  itself does when no control daemon answers) and nothing was counted for it.
- `release` when the sharer's run is over (each attempt); `stop_all` for a clean-up by hand (the
  pool daemon leaves them running for its running sharers when it stops).
- Nothing here raises for a control daemon's failure: MPS improves how sharers are contained,
  it is never a reason for a job not to start.
"""

from __future__ import annotations

import math
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpupool.core.paths import DIR_MODE, TOP_MODE

CONTROL_BINARY = "nvidia-cuda-mps-control"
NOT_INSTALLED = "NVIDIA MPS is not installed: nvidia-cuda-mps-control not found"
MIB = 1 << 20
# The control daemon writes its pid here, in its pipe directory (NVIDIA's MPS guide,
# "nvidia-cuda-mps-control"): the one documented sign that a daemon runs for that directory.
PID_FILE = "nvidia-cuda-mps-control.pid"
# The daemon's named pipes and UNIX sockets live in the pipe directory, and a socket's path
# is at most 107 bytes on Linux (sun_path, 108 with its NUL). NVIDIA does not document the
# names it makes there: 80 leaves them 27 bytes. A longer directory fails here, with a
# reason, rather than inside the driver, where a job would just run without MPS.
PIPE_DIR_MAX_BYTES = 80
CONTROL_TIMEOUT_S = 30.0  # `-d` returns once daemonized; `quit` once the daemon is told
READY_TIMEOUT_S = 5.0  # for the pid file after `-d`: clients started earlier miss MPS
# The control daemon's files must be usable by the jobs' users (it runs as the daemon's
# user, root in shared mode). The pool daemon's own umask (077) would make them private;
# 022 is what NVIDIA's root-run examples (a root shell) start it with.
CONTROL_UMASK = 0o022


@dataclass(frozen=True)
class MpsPaths:
    """Where one GPU's control daemon keeps its pipes and sockets, and its logs."""

    gpu_index: int
    state_dir: Path

    @property
    def root(self) -> Path:
        return self.state_dir / "mps" / f"gpu-{self.gpu_index}"

    @property
    def pipe_dir(self) -> Path:
        return self.root / "pipe"

    @property
    def log_dir(self) -> Path:
        return self.root / "log"


def _directories(paths: MpsPaths) -> dict[str, str]:
    # The same two for the daemon, its `quit` and every client: the guide asks for one pipe
    # directory across the daemon and all clients of its server.
    return {
        "CUDA_MPS_PIPE_DIRECTORY": str(paths.pipe_dir),
        "CUDA_MPS_LOG_DIRECTORY": str(paths.log_dir),
    }


def start_command(paths: MpsPaths, gpu: str | int) -> tuple[list[str], dict[str, str]]:
    """`nvidia-cuda-mps-control -d` for one GPU: its UUID (preferred) or its NVML index.

    The environment is added to the daemon's own. CUDA_VISIBLE_DEVICES names the one GPU
    the daemon (and each server it starts) may use, so every client sees it as device 0;
    CUDA_DEVICE_ORDER=PCI_BUS_ID makes an index mean what it means to NVML and the pool.
    """
    visible = str(gpu)
    if not visible or "," in visible:
        raise ValueError(f"one GPU for an MPS control daemon, not {gpu!r}")
    env = {"CUDA_VISIBLE_DEVICES": visible, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    return [CONTROL_BINARY, "-d"], {**env, **_directories(paths)}


def stop_command(paths: MpsPaths) -> tuple[list[str], dict[str, str], str]:
    """`echo quit | nvidia-cuda-mps-control` for that GPU's daemon: argv, env, stdin."""
    return [CONTROL_BINARY], _directories(paths), "quit\n"


def pinned_memory_limit(granted_bytes: int) -> str:
    """CUDA_MPS_PINNED_DEVICE_MEM_LIMIT for a grant: "0=<MiB>M", rounded down (never past
    the grant), at least 1. Device 0: the job's one GPU as its client sees it."""
    if granted_bytes < 0:
        raise ValueError(f"a grant of GPU memory is not negative: {granted_bytes}")
    return f"0={max(1, granted_bytes // MIB)}M"


def active_thread_percentage(fraction: float) -> int:
    """CUDA_MPS_ACTIVE_THREAD_PERCENTAGE for a share of a GPU: 1..100, rounded up, so that a
    tiny share still gets threads. The 9-digit rounding first drops float noise
    (0.07 * 100 is 7.000000000000001, which must stay 7)."""
    if not 0 < fraction <= 1:  # NaN fails too
        raise ValueError(f"a share of a GPU is in (0, 1], not {fraction}")
    return min(100, max(1, math.ceil(round(fraction * 100, 9))))


def sharer_env(
    paths: MpsPaths, granted_bytes: int, fraction: float, *, gpu_uuid: str | None = None
) -> dict[str, str]:
    """The variables a sharer's job gets on top of its own, to be that GPU's MPS client.

    `gpu_uuid`: also CUDA_VISIBLE_DEVICES, as the UUID. The daemon renumbers its one GPU as
    device 0 for its clients, and a client keeping CUDA_VISIBLE_DEVICES=<index> gets an
    error (NVIDIA's guide); a UUID means the same GPU with MPS and without it.
    """
    env = {
        **_directories(paths),
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": pinned_memory_limit(granted_bytes),
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(active_thread_percentage(fraction)),
    }
    if gpu_uuid:
        env["CUDA_VISIBLE_DEVICES"] = gpu_uuid
    return env


@dataclass(frozen=True)
class RunResult:
    returncode: int
    output: str  # stdout and stderr together


# run(argv, env added to the daemon's own, stdin text or None). May raise OSError
# (FileNotFoundError: no such binary) or subprocess.SubprocessError (a timeout).
Runner = Callable[[Sequence[str], Mapping[str, str], str | None], RunResult]


def run_control(argv: Sequence[str], env: Mapping[str, str], stdin_text: str | None) -> RunResult:
    """The real runner. Output goes through a file, not a pipe: a daemon that keeps the
    descriptors it was given would hold a pipe open, and the wait for it, for ever. The
    pool daemon's CUDA_MPS_* variables are left out: set for the control daemon they would
    become defaults for every sharer (NVIDIA's "control daemon level")."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_MPS_")}
    with tempfile.TemporaryFile(mode="w+") as output:
        done = subprocess.run(
            list(argv),
            env={**inherited, **env},
            input=stdin_text,
            stdin=None if stdin_text is not None else subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=CONTROL_TIMEOUT_S,
            umask=CONTROL_UMASK,
            check=False,
        )
        output.seek(0)
        return RunResult(done.returncode, output.read())


def control_running(paths: MpsPaths) -> bool:
    """Whether a control daemon runs for this pipe directory: its pid file names a live
    process. One left by an earlier daemon of the pool (a crash, a restart with sharers
    still running) is taken over rather than started twice. A reused pid is read as alive:
    its clients then reach no daemon and run without MPS, the driver's own fallback."""
    try:
        pid = int((paths.pipe_dir / PID_FILE).read_text().strip())
        os.kill(pid, 0)
    except PermissionError:  # alive, another user's
        return True
    except (OSError, ValueError):
        return False
    return True


class MpsControl:
    """The control daemons of this pool's shared GPUs: one per GPU while it has sharers.

    Thread-safe. The commands run under the lock: two first sharers of a GPU never start
    two daemons, and a last release's `quit` never crosses the next first acquire's start.
    """

    def __init__(
        self, state_dir: Path, run: Runner = run_control, ready_timeout_s: float = READY_TIMEOUT_S
    ) -> None:
        self._state_dir = state_dir
        self._run = run
        self._ready_timeout_s = ready_timeout_s
        self._sharers: dict[int, set[int]] = {}  # GPU index -> job ids
        self._gpu_of: dict[int, int] = {}  # job id -> GPU index
        self._lock = threading.Lock()

    def paths(self, gpu: int) -> MpsPaths:
        return MpsPaths(gpu, self._state_dir)

    def acquire(self, gpu: int, job_id: int, gpu_uuid: str | None = None) -> str | None:
        """Count the job as a sharer of GPU `gpu`, starting its daemon for the first one.
        None: MPS is up; else why not (the job runs without it, and is not counted). A job
        acquiring again (its next attempt) replaces what it had."""
        with self._lock:
            problem = self._release_locked(job_id) if self._gpu_of.get(job_id) != gpu else None
            if gpu not in self._sharers:
                started = self._start_locked(self.paths(gpu), gpu_uuid or gpu)
                if started is not None:
                    return started if problem is None else f"{problem}; {started}"
                self._sharers[gpu] = set()
            self._sharers[gpu].add(job_id)
            self._gpu_of[job_id] = gpu
            return problem

    def release(self, job_id: int) -> str | None:
        """The job's run is over: its GPU's daemon stops when it was the last sharer.
        A problem stopping it is returned (the daemon is forgotten all the same)."""
        with self._lock:
            return self._release_locked(job_id)

    def running(self) -> dict[int, frozenset[int]]:
        """GPU index -> the job ids sharing it, for each GPU whose daemon this pool runs."""
        with self._lock:
            return {gpu: frozenset(jobs) for gpu, jobs in self._sharers.items()}

    def stop_all(self) -> list[str]:
        """Stop every daemon (the pool daemon stops); the problems met, one per GPU."""
        with self._lock:
            problems = [self._stop_locked(self.paths(gpu)) for gpu in sorted(self._sharers)]
            self._sharers.clear()
            self._gpu_of.clear()
        return [p for p in problems if p is not None]

    def _release_locked(self, job_id: int) -> str | None:
        gpu = self._gpu_of.pop(job_id, None)
        if gpu is None:
            return None
        jobs = self._sharers[gpu]
        jobs.discard(job_id)
        if jobs:
            return None
        del self._sharers[gpu]
        return self._stop_locked(self.paths(gpu))

    def _start_locked(self, paths: MpsPaths, gpu: str | int) -> str | None:
        where = f"MPS on GPU {paths.gpu_index}"
        size = len(os.fsencode(paths.pipe_dir))
        if size > PIPE_DIR_MAX_BYTES:
            return (
                f"{where}: its pipe directory {paths.pipe_dir} is {size} bytes long, over "
                f"{PIPE_DIR_MAX_BYTES} (UNIX socket paths are short): use a shorter --state-dir"
            )
        try:
            self._make_directories(paths)
        except OSError as exc:
            return f"{where}: cannot make {exc.filename or paths.root}: {exc.strerror or exc}"
        if control_running(paths):
            return None  # an earlier daemon of this pool's, still serving: take it over
        argv, env = start_command(paths, gpu)
        failed = self._call(where, argv, env, None)
        if failed is not None:
            return failed
        deadline = time.monotonic() + self._ready_timeout_s
        while not control_running(paths):
            if time.monotonic() >= deadline:
                return f"{where}: `{' '.join(argv)}` wrote no {PID_FILE} in {paths.pipe_dir}"
            time.sleep(0.02)
        return None

    def _stop_locked(self, paths: MpsPaths) -> str | None:
        argv, env, stdin_text = stop_command(paths)
        return self._call(f"MPS on GPU {paths.gpu_index}", argv, env, stdin_text)

    def _call(
        self, where: str, argv: Sequence[str], env: Mapping[str, str], stdin_text: str | None
    ) -> str | None:
        what = " ".join(argv) if stdin_text is None else f"{stdin_text.strip()} | {argv[0]}"
        try:
            done = self._run(argv, env, stdin_text)
        except FileNotFoundError:
            return NOT_INSTALLED
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{where}: `{what}` could not run: {exc}"
        if done.returncode != 0:
            said = done.output.strip()[-500:] or "no output"
            return f"{where}: `{what}` failed (exit {done.returncode}): {said}"
        return None

    @staticmethod
    def _make_directories(paths: MpsPaths) -> None:
        # Jobs' users reach the pipes by name through directories they cannot list (as
        # checkpoints/, docs/security.md); the logs name every sharer's processes: private.
        # The modes are set again on every start: mkdir's are cut by the umask.
        for directory in (paths.root.parent, paths.root, paths.pipe_dir):
            directory.mkdir(mode=TOP_MODE, parents=True, exist_ok=True)
            os.chmod(directory, TOP_MODE)
        paths.log_dir.mkdir(mode=DIR_MODE, exist_ok=True)
        os.chmod(paths.log_dir, DIR_MODE)
