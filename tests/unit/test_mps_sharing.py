"""`gpupool server --mps` in the local executor: which runs become MPS clients of their GPU,
with what, and the control daemon's life across runs and a restart (mps_sharing.py). The
control program is a fake recording its calls (tests/unit/test_mps.py's); no GPU here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_mps import FakeControl

from gpupool.core.execution import Allocation
from gpupool.core.hardware import Gpu
from gpupool.executor.mps import MpsControl
from gpupool.executor.mps_sharing import MpsSharing

GIB = 1 << 30
GPUS = {0: Gpu(0, "A100-80GB", 80 * GIB, uuid="GPU-aaaa"), 1: Gpu(1, "A100-80GB", 80 * GIB)}


@pytest.fixture
def tmp_path(short_tmp_path: Path) -> Path:
    return short_tmp_path  # MPS pipe paths must stay short (conftest.py)


def sharing(tmp_path: Path, fake: FakeControl) -> MpsSharing:
    return MpsSharing(MpsControl(tmp_path, run=fake), GPUS)


def test_a_sharer_is_pinned_to_its_grant_and_its_share_of_threads(tmp_path: Path) -> None:
    fake = FakeControl()
    env, problem = sharing(tmp_path, fake).env_for(7, Allocation("vm", (0,), 20 * GIB))
    assert problem is None
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=20480M"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-aaaa"  # the daemon renumbers: by UUID
    assert env["CUDA_MPS_PIPE_DIRECTORY"].endswith("/mps/gpu-0/pipe")
    assert [call[0][1:] for call in fake.calls] == [["-d"]]


def test_whole_gpus_are_not_shared_and_start_nothing(tmp_path: Path) -> None:
    fake = FakeControl()
    assert sharing(tmp_path, fake).env_for(7, Allocation("vm", (0, 1))) == ({}, None)
    assert fake.calls == []


def test_the_daemon_starts_with_the_first_sharer_and_stops_after_the_last(tmp_path: Path) -> None:
    fake = FakeControl()
    mps = sharing(tmp_path, fake)
    mps.env_for(1, Allocation("vm", (0,), 10 * GIB))
    mps.env_for(2, Allocation("vm", (0,), 10 * GIB))
    assert [c[2] for c in fake.calls] == [None]  # one start
    mps.release(1)
    assert [c[2] for c in fake.calls] == [None]  # job 2 still shares it
    mps.release(2)
    assert [c[2] for c in fake.calls] == [None, "quit\n"]


def test_a_run_without_mps_says_why_in_its_log(tmp_path: Path) -> None:
    mps = sharing(tmp_path, FakeControl(missing=True))
    env = mps.launch_env(3, Allocation("vm", (0,), 10 * GIB), tmp_path / "jobs" / "3")
    assert env == {}
    log = (tmp_path / "jobs" / "3" / "output.log").read_text()
    assert "running without NVIDIA MPS: NVIDIA MPS is not installed" in log


def test_a_restarted_pool_counts_its_running_sharers_again(tmp_path: Path) -> None:
    fake = FakeControl()
    first = sharing(tmp_path, fake)
    env, _ = first.env_for(4, Allocation("vm", (0,), 10 * GIB))
    jobdir = tmp_path / "jobs" / "4"
    jobdir.mkdir(parents=True)
    (jobdir / "launch.json").write_text(json.dumps({"env": env}))
    again = sharing(tmp_path, fake)  # the daemon restarted; the control daemon runs on
    again.readopt(4, jobdir)
    assert again.control.running() == {0: frozenset({4})}
    again.release(4)
    assert fake.calls[-1][2] == "quit\n"
