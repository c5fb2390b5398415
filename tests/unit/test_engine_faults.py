"""The engine's handling of faults (engine/faults.py): the facts it reads and the words it
writes, and a lost job whose processes cannot be killed keeping its GPUs, with a real
store, executor, engine and processes (what the engine decides about each fault is tested
without them in test_engine_react.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from executor_helpers import launch, state_of, wait_for

from gpupool.core.execution import ExitRecord, Leftovers, RunState
from gpupool.core.hardware import Gpu, Inventory, Node
from gpupool.core.job import HeldReason, Job, JobSpec, JobState, Resources
from gpupool.engine import Engine
from gpupool.engine.faults import (
    end_time_of,
    gpus_outside,
    lost_cause,
    outside_cause,
)
from gpupool.executor import LocalExecutor
from gpupool.executor.files import process_alive, read_json
from gpupool.store import Store

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def _job(node: str = "box", gpus: tuple[int, ...] = (0, 1), start: float | None = 100.0) -> Job:
    spec = JobSpec(command=("true",), resources=Resources(gpus=len(gpus)))
    return Job(1, spec, "alice", JobState.RUNNING, 50.0, start, node=node, gpus=gpus)


def _inventory(*nodes: tuple[str, int]) -> Inventory:
    made = tuple(
        Node(name, tuple(Gpu(i, "A100-80GB", 80 << 30) for i in range(n))) for name, n in nodes
    )
    return Inventory(made, source="declared")


def test_gpus_outside_the_inventory() -> None:
    inv = _inventory(("box", 2), ("other", 4))
    assert gpus_outside(_job(gpus=(0, 1)), inv) == ()
    assert gpus_outside(_job(gpus=(1, 2, 3)), inv) == (2, 3)
    assert gpus_outside(_job(node="gone", gpus=(0, 1)), inv) == (0, 1)
    assert outside_cause(_job(gpus=(1, 2, 3)), inv, (2, 3)) == (
        "its GPUs 2,3 on box are not in the pool's inventory any more"
    )
    assert outside_cause(_job(gpus=(2,)), inv, (2,)) == (
        "its GPU 2 on box is not in the pool's inventory any more"
    )
    assert outside_cause(_job(node="gone"), inv, (0, 1)) == (
        "its node gone is not in the pool's inventory any more"
    )


@pytest.mark.parametrize(
    ("recorded", "expected"),
    [(130.0, 130.0), (90.0, 100.0), (250.0, 200.0)],  # as recorded; before start; after now
)
def test_the_end_time_is_the_exit_records(recorded: float, expected: float) -> None:
    record = ExitRecord(0, None, "exited", 100.0, recorded, "exited with code 0")
    assert end_time_of(record, _job(start=100.0), now=200.0) == expected


def test_a_run_on_another_clock_keeps_its_duration() -> None:
    """A backend's record is on its engine's clock, in whole seconds (Slurm's): a run the
    engine timed 100..102 that the pool first saw running at 101.6 ended no earlier than
    101.6 + 2 s. Its GPU-hours are what the engine timed, not zero (found in the real-Slurm
    test of `--backend any`: a short run counted 0 GPU-hours)."""
    record = ExitRecord(0, None, "exited", 100.0, 102.0, "exited with code 0")
    assert end_time_of(record, _job(start=101.6), now=110.0) == pytest.approx(103.6)
    assert end_time_of(record, _job(start=101.6), now=103.0) == 103.0  # never past now


def test_the_story_of_a_lost_job_says_what_was_killed() -> None:
    head = "its supervisor died without recording an exit"
    assert lost_cause(Leftovers(7, killed=(7, 9, 12))) == (
        f"{head}; killed its process 7 and 2 other processes of its session (9, 12) "
        "before freeing its GPUs"
    )
    assert lost_cause(Leftovers(7, killed=(9,))) == (
        f"{head}; 1 other process of its session (9) before freeing its GPUs"
    )
    assert lost_cause(Leftovers(7)) == f"{head}; none of its processes was still running"
    assert "machine has restarted" in lost_cause(Leftovers(7, other_boot=True))
    assert "before it recorded its command" in lost_cause(Leftovers(None))


@pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root: the job runs as root, the pool as nobody"
)
def test_a_lost_job_whose_processes_cannot_be_killed_keeps_its_gpus() -> None:
    # A job of root's under a pool run by nobody: nobody may not kill it. Not under
    # tmp_path, which nobody cannot enter.
    state = Path(tempfile.mkdtemp(prefix="gpupool-held-"))
    state.chmod(0o777)
    url = f"sqlite:///{state / 'state.db'}"
    ex = LocalExecutor(state)
    child: dict[str, int] = {}
    try:
        launch(ex, 1, ["sleep", "infinity"], ENV, "/", None, 1.0)
        child = wait_for(lambda: read_json(ex.job_dir(1) / "child.json"), what="child.json")
        claim = wait_for(lambda: read_json(ex.job_dir(1) / "claim.json"), what="claim.json")
        os.kill(claim["supervisor_pid"], signal.SIGKILL)
        wait_for(lambda: state_of(ex, 1) is RunState.LOST, what="LOST")
        # The job's files are private (0700/0600): open them to nobody, so that what
        # keeps the job is the signal's permission alone.
        for path in (ex.job_dir(1).parent, ex.job_dir(1), *ex.job_dir(1).iterdir()):
            path.chmod(0o777 if path.is_dir() else 0o666)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - reports through the pipe
            try:
                os.setgid(65534)
                os.setuid(65534)
                store = Store.open(url)
                job = store.submit(JobSpec(command=("sleep", "60")), "alice", 10.0)
                store.commit_starts([(job.id, "box", (0,))], store.allocation_version(), 20.0)
                engine = Engine(store, LocalExecutor(state), _inventory(("box", 1)))
                engine.recover()  # the job is LOST: its processes cannot be killed
                engine.run_pass()  # each poll tries again
                os.write(w, json.dumps([store.get(job.id).state.value] * 2).encode())
            finally:
                os._exit(0)
        os.close(w)
        with os.fdopen(r) as f:
            assert json.loads(f.read() or "null") == ["RUNNING", "RUNNING"]
        os.waitpid(pid, 0)
        store = Store.open(url)
        held = store.get(1)
        assert (held.state, held.reason, held.gpus) == (
            JobState.RUNNING,
            HeldReason.SUPERVISOR_LOST.value,
            (0,),
        )
        notes = [e for e in held.events if e.frm is e.to]
        assert len(notes) == 1  # told once, not every pass
        assert f"its processes {child['pid']} still run" in notes[0].cause
        assert "may not be killed" in notes[0].cause
        assert process_alive(child["pid"], child["start_ticks"])
        # The pool's user can kill them (here: root): then the GPUs are freed.
        Engine(store, ex, _inventory(("box", 1))).recover()
        done = store.get(1)
        assert (done.state, done.reason) == (JobState.FAILED, "NodeFail")
        assert f"killed its process {child['pid']}" in done.events[-1].cause
        assert not process_alive(child["pid"], child["start_ticks"])
        store.close()
    finally:
        if child and process_alive(child["pid"], child["start_ticks"]):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child["pgid"], signal.SIGKILL)
        ex.close()
        subprocess.run(["rm", "-rf", str(state)], check=True)
