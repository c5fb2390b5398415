"""NVIDIA MPS for shared GPUs (executor/mps.py, docs/mps.md): the control daemon's command
lines and a sharer's variables in NVIDIA's formats, and one daemon per GPU from its first
sharer to its last, with a fake `nvidia-cuda-mps-control` (no GPU needed)."""

from __future__ import annotations

import os
import signal
import stat
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from gpupool.executor.mps import (
    NOT_INSTALLED,
    PID_FILE,
    MpsControl,
    MpsPaths,
    RunResult,
    active_thread_percentage,
    control_running,
    pinned_memory_limit,
    sharer_env,
    start_command,
    stop_command,
)


@pytest.fixture
def tmp_path(short_tmp_path: Path) -> Path:
    return short_tmp_path  # MPS pipe paths must stay short (conftest.py)


GIB = 1 << 30
MIB = 1 << 20
UUID = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"


class FakeControl:
    """Records each call; `-d` writes the pid file as the real daemon does (a live pid: this
    process's), `quit` removes it. `start_exit`, `start_writes_pid`, `missing`: failures."""

    def __init__(
        self, start_exit: int = 0, start_writes_pid: bool = True, missing: bool = False
    ) -> None:
        self.calls: list[tuple[list[str], dict[str, str], str | None]] = []
        self.start_exit = start_exit
        self.start_writes_pid = start_writes_pid
        self.missing = missing

    def __call__(
        self, argv: Sequence[str], env: Mapping[str, str], stdin_text: str | None
    ) -> RunResult:
        if self.missing:
            raise FileNotFoundError(2, "No such file or directory", argv[0])
        self.calls.append((list(argv), dict(env), stdin_text))
        pid_file = Path(env["CUDA_MPS_PIPE_DIRECTORY"]) / PID_FILE
        if list(argv[1:]) == ["-d"]:
            if self.start_exit:
                return RunResult(self.start_exit, "An instance of this daemon is already running")
            if self.start_writes_pid:
                pid_file.write_text(f"{os.getpid()}\n")
        elif stdin_text == "quit\n":
            pid_file.unlink(missing_ok=True)
        return RunResult(0, "")

    def starts(self) -> list[str]:
        return [env["CUDA_MPS_PIPE_DIRECTORY"] for argv, env, _ in self.calls if "-d" in argv]

    def stops(self) -> list[str]:
        return [env["CUDA_MPS_PIPE_DIRECTORY"] for _, env, stdin in self.calls if stdin]


def pipe(state: Path, gpu: int) -> str:
    return str(state / "mps" / f"gpu-{gpu}" / "pipe")


# --- command lines and variables --------------------------------------------------------


def test_paths_are_per_gpu_under_the_state_dir(tmp_path: Path) -> None:
    paths = MpsPaths(3, tmp_path)
    assert paths.pipe_dir == tmp_path / "mps" / "gpu-3" / "pipe"
    assert paths.log_dir == tmp_path / "mps" / "gpu-3" / "log"


def test_start_command_shows_the_daemon_one_gpu_by_uuid_or_index(tmp_path: Path) -> None:
    paths = MpsPaths(2, tmp_path)
    argv, env = start_command(paths, UUID)
    assert argv == ["nvidia-cuda-mps-control", "-d"]
    assert env == {
        "CUDA_VISIBLE_DEVICES": UUID,
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",  # an index means NVML's GPU
        "CUDA_MPS_PIPE_DIRECTORY": str(tmp_path / "mps/gpu-2/pipe"),
        "CUDA_MPS_LOG_DIRECTORY": str(tmp_path / "mps/gpu-2/log"),
    }
    assert start_command(paths, 2)[1]["CUDA_VISIBLE_DEVICES"] == "2"
    for not_one in ("", "0,1"):
        with pytest.raises(ValueError):
            start_command(paths, not_one)


def test_stop_command_is_quit_on_the_controls_stdin(tmp_path: Path) -> None:
    argv, env, stdin_text = stop_command(MpsPaths(0, tmp_path))
    assert (argv, stdin_text) == (["nvidia-cuda-mps-control"], "quit\n")
    assert env == {
        "CUDA_MPS_PIPE_DIRECTORY": str(tmp_path / "mps/gpu-0/pipe"),
        "CUDA_MPS_LOG_DIRECTORY": str(tmp_path / "mps/gpu-0/log"),
    }


def test_sharer_env_in_nvidias_formats(tmp_path: Path) -> None:
    paths = MpsPaths(1, tmp_path)
    assert sharer_env(paths, 20 * GIB, 0.25) == {
        "CUDA_MPS_PIPE_DIRECTORY": str(tmp_path / "mps/gpu-1/pipe"),
        "CUDA_MPS_LOG_DIRECTORY": str(tmp_path / "mps/gpu-1/log"),
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=20480M",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25",
    }
    # With the UUID the job sees its GPU through the daemon (as device 0) and without it.
    assert sharer_env(paths, GIB, 0.5, gpu_uuid=UUID)["CUDA_VISIBLE_DEVICES"] == UUID


@pytest.mark.parametrize(
    ("granted", "limit"),
    [
        (20 * GIB, "0=20480M"),
        (20 * 10**9, "0=19073M"),  # 20GB (decimal): 19073.49 MiB, down
        (MIB, "0=1M"),
        (2 * MIB - 1, "0=1M"),  # never past the grant
        (MIB - 1, "0=1M"),  # at least 1
        (0, "0=1M"),
    ],
)
def test_memory_limit_rounds_down_to_whole_mib_at_least_one(granted: int, limit: str) -> None:
    assert pinned_memory_limit(granted) == limit


def test_memory_limit_refuses_a_negative_grant() -> None:
    with pytest.raises(ValueError):
        pinned_memory_limit(-1)


@pytest.mark.parametrize(
    ("fraction", "percent"),
    [
        (0.25, 25),
        (0.5, 50),
        (1.0, 100),
        (0.07, 7),  # 0.07 * 100 == 7.000000000000001: float noise is not a share
        (0.14, 14),
        (0.29, 29),  # 28.999999999999996
        (1 / 3, 34),  # up
        (0.999, 100),
        (0.001, 1),  # a tiny share still gets threads
        (1e-9, 1),
    ],
)
def test_thread_percentage_rounds_up_within_1_to_100(fraction: float, percent: int) -> None:
    assert active_thread_percentage(fraction) == percent


@pytest.mark.parametrize("fraction", [0.0, -0.5, 1.01, float("nan")])
def test_thread_percentage_refuses_what_is_not_a_share(fraction: float) -> None:
    with pytest.raises(ValueError):
        active_thread_percentage(fraction)


# --- one daemon per GPU, from its first sharer to its last -------------------------------


def test_first_sharer_starts_the_gpus_daemon_and_the_last_stops_it(tmp_path: Path) -> None:
    fake = FakeControl()
    mps = MpsControl(tmp_path, run=fake)
    assert mps.acquire(0, 1, UUID) is None
    assert mps.acquire(0, 2, UUID) is None
    assert mps.acquire(1, 3) is None
    assert fake.starts() == [pipe(tmp_path, 0), pipe(tmp_path, 1)]  # once per GPU
    assert fake.calls[0][1]["CUDA_VISIBLE_DEVICES"] == UUID
    assert fake.calls[1][1]["CUDA_VISIBLE_DEVICES"] == "1"  # no UUID: the index
    assert mps.running() == {0: frozenset({1, 2}), 1: frozenset({3})}

    assert mps.release(1) is None
    assert fake.stops() == []  # job 2 still shares GPU 0
    assert mps.release(2) is None
    assert fake.stops() == [pipe(tmp_path, 0)]
    assert fake.calls[-1][0] == ["nvidia-cuda-mps-control"]
    assert mps.running() == {1: frozenset({3})}
    assert mps.release(2) is None and mps.release(99) is None  # nothing: no call
    assert len(fake.calls) == 3

    assert mps.acquire(0, 4) is None  # a new first sharer: started again
    assert fake.starts()[-1] == pipe(tmp_path, 0)


def test_a_failing_start_is_reported_not_raised_and_not_counted(tmp_path: Path) -> None:
    fake = FakeControl(start_exit=1)
    mps = MpsControl(tmp_path, run=fake)
    problem = mps.acquire(0, 1)
    assert problem is not None
    assert "GPU 0" in problem and "exit 1" in problem and "already running" in problem
    assert mps.running() == {}
    assert mps.release(1) is None and fake.stops() == []
    fake.start_exit = 0
    assert mps.acquire(0, 2) is None  # the next sharer tries again
    assert len(fake.starts()) == 2 and mps.running() == {0: frozenset({2})}


def test_a_missing_binary_says_mps_is_not_installed(tmp_path: Path) -> None:
    mps = MpsControl(tmp_path, run=FakeControl(missing=True))
    assert mps.acquire(0, 1) == NOT_INSTALLED
    assert NOT_INSTALLED == "NVIDIA MPS is not installed: nvidia-cuda-mps-control not found"
    assert mps.running() == {}


def test_a_daemon_that_never_writes_its_pid_file_is_a_problem(tmp_path: Path) -> None:
    mps = MpsControl(tmp_path, run=FakeControl(start_writes_pid=False), ready_timeout_s=0)
    problem = mps.acquire(0, 1)
    assert problem is not None and PID_FILE in problem
    assert mps.running() == {}


def test_a_stop_that_fails_is_reported_and_the_daemon_forgotten(tmp_path: Path) -> None:
    fake = FakeControl()
    mps = MpsControl(tmp_path, run=fake)
    assert mps.acquire(0, 1) is None
    fake.missing = True
    assert mps.release(1) == NOT_INSTALLED
    assert mps.running() == {}


def test_a_job_acquiring_again_moves_to_its_new_gpu(tmp_path: Path) -> None:
    fake = FakeControl()
    mps = MpsControl(tmp_path, run=fake)
    assert mps.acquire(0, 1) is None
    assert mps.acquire(0, 1) is None  # the same GPU: nothing new
    assert len(fake.calls) == 1
    assert mps.acquire(1, 1) is None  # its next attempt, elsewhere
    assert fake.stops() == [pipe(tmp_path, 0)]
    assert mps.running() == {1: frozenset({1})}


def test_stop_all_stops_every_daemon(tmp_path: Path) -> None:
    fake = FakeControl()
    mps = MpsControl(tmp_path, run=fake)
    for gpu, job in ((0, 1), (0, 2), (3, 3)):
        assert mps.acquire(gpu, job) is None
    assert mps.stop_all() == []
    assert fake.stops() == [pipe(tmp_path, 0), pipe(tmp_path, 3)]
    assert mps.running() == {}
    assert mps.release(1) is None and len(fake.stops()) == 2


def test_a_daemon_left_running_is_taken_over_not_started_twice(tmp_path: Path) -> None:
    paths = MpsPaths(0, tmp_path)
    paths.pipe_dir.mkdir(parents=True)
    (paths.pipe_dir / PID_FILE).write_text(f"{os.getpid()}\n")  # alive
    fake = FakeControl()
    mps = MpsControl(tmp_path, run=fake)
    assert mps.acquire(0, 1) is None
    assert fake.starts() == []
    assert mps.release(1) is None
    assert fake.stops() == [pipe(tmp_path, 0)]  # ours now: stopped after the last sharer


def test_a_stale_or_garbled_pid_file_means_no_daemon(tmp_path: Path) -> None:
    paths = MpsPaths(0, tmp_path)
    paths.pipe_dir.mkdir(parents=True)
    assert not control_running(paths)
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    for text in (f"{pid_max + 1}\n", "not a pid\n"):
        (paths.pipe_dir / PID_FILE).write_text(text)
        assert not control_running(paths)


def test_directories_are_reachable_by_name_and_logs_private(tmp_path: Path) -> None:
    assert MpsControl(tmp_path, run=FakeControl()).acquire(0, 1) is None
    paths = MpsPaths(0, tmp_path)
    for passable in (tmp_path / "mps", paths.root, paths.pipe_dir):
        assert stat.S_IMODE(passable.stat().st_mode) == 0o711
    assert stat.S_IMODE(paths.log_dir.stat().st_mode) == 0o700


def test_a_pipe_directory_too_long_for_sockets_is_refused_before_any_call(
    tmp_path: Path,
) -> None:
    fake = FakeControl()
    problem = MpsControl(tmp_path / ("x" * 80), run=fake).acquire(0, 1)
    assert problem is not None and "shorter --state-dir" in problem
    assert fake.calls == []


def test_concurrent_first_sharers_start_one_daemon(tmp_path: Path) -> None:
    fake = FakeControl()
    mps = MpsControl(tmp_path, run=fake)
    together = threading.Barrier(8)
    problems: list[str | None] = []

    def share(job: int) -> None:
        together.wait()
        problems.append(mps.acquire(job % 2, job))

    threads = [threading.Thread(target=share, args=(job,)) for job in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert problems == [None] * 8
    assert sorted(fake.starts()) == [pipe(tmp_path, 0), pipe(tmp_path, 1)]
    assert mps.running() == {0: frozenset({0, 2, 4, 6}), 1: frozenset({1, 3, 5, 7})}


# --- the real runner, on a stand-in for nvidia-cuda-mps-control ---------------------------

FAKE_BINARY = """#!/bin/sh
record="$FAKE_MPS_RECORD"
{
  echo "args=$*"
  echo "umask=$(umask)"
  echo "visible=$CUDA_VISIBLE_DEVICES"
  echo "threads=${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE-unset}"
} >> "$record"
if [ "$1" = "-d" ]; then
  # A daemon that keeps the descriptors it was given: must not hold its starter up.
  sleep 60 &
  echo $! > "$record.child"
  echo "$PPID" > "$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid"
else
  echo "stdin=$(cat)" >> "$record"
fi
"""


def test_the_real_runner_starts_and_stops_through_the_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    binary = bin_dir / "nvidia-cuda-mps-control"
    binary.write_text(FAKE_BINARY)
    binary.chmod(0o755)
    record = tmp_path / "record"
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_MPS_RECORD", str(record))
    monkeypatch.setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "5")  # the pool daemon's own
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    mps = MpsControl(tmp_path / "s")
    umask = os.umask(0o077)  # the pool daemon's (core/paths.py PRIVATE_UMASK)
    try:
        assert mps.acquire(0, 1, UUID) is None
        assert mps.release(1) is None
    finally:
        os.umask(umask)
        child = Path(f"{record}.child")
        if child.exists():
            os.kill(int(child.read_text()), signal.SIGKILL)
    assert record.read_text().splitlines() == [
        "args=-d",
        "umask=0022",  # not the pool daemon's 077: jobs' users reach the sockets
        f"visible={UUID}",
        "threads=unset",  # the pool daemon's CUDA_MPS_* are not the sharers' defaults
        "args=",
        "umask=0022",
        "visible=",
        "threads=unset",
        "stdin=quit",
    ]


def test_the_real_runner_without_the_binary_says_not_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert MpsControl(tmp_path / "s").acquire(0, 1) == NOT_INSTALLED
