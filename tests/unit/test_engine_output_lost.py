"""A run whose log's disk was full while it ran (executor/log_space.py): its history says that
output was lost, before the line of its end (engine/react.py, engine/outcome.py)."""

from __future__ import annotations

from dataclasses import replace

from gpupool.core.execution import ExitReason, ExitRecord, Handle, Observation, RunState
from gpupool.core.hardware import Gpu, Inventory, Node
from gpupool.core.job import Job, JobSpec, JobState, Resources
from gpupool.core.project import Project
from gpupool.engine.events import Finish, Note, Polled, Release
from gpupool.engine.react import react
from gpupool.engine.state import EngineState
from gpupool.executor.records import read_exit_record
from gpupool.policy.snapshot import PolicyConfig

NOW = 1000.0


def _state(retries: int = 0) -> EngineState:
    node = Node("box", (Gpu(0, "A100-80GB", 80 << 30),))
    spec = JobSpec(("train",), Resources(gpus=1), time_limit_s=3600.0, retries=retries)
    job = Job(1, spec, "alice", JobState.RUNNING, 10.0, start_time=100.0, node="box", gpus=(0,))
    state = EngineState(Inventory((node,), source="declared"), PolicyConfig())
    state.replace_all((job,), (Project("default"),))
    return state


def _exited(code: int, lost: tuple[tuple[float, float], ...]) -> Polled:
    record = ExitRecord(code, None, ExitReason.EXITED, 100.0, 500.0, "", output_lost=lost)
    return Polled({1: Observation(RunState.EXITED, record)}, NOW)


def test_one_stretch_of_full_disk_is_told_before_the_end() -> None:
    out = react(_state(), _exited(0, ((160.0, 220.0),)))
    assert [type(i) for i in out] == [Note, Finish]
    note = out[0]
    assert isinstance(note, Note) and note.job_id == 1
    assert note.cause == (
        "output lost: its log's disk was full for 1m00s, from 1m00s after the start; "
        "what the job wrote then is not in its log"
    )
    assert note.log_line is not None and note.log_line.text == f"job 1: {note.cause}"


def test_several_stretches_are_told_in_all() -> None:
    out = react(_state(), _exited(0, ((160.0, 220.0), (300.0, 330.0), (400.0, 400.0))))
    note = out[0]
    assert isinstance(note, Note)
    assert note.cause == (
        "output lost: its log's disk was full 3 times, 1m30s in all, the first 1m00s "
        "after the start; what the job wrote then is not in its log"
    )


def test_a_run_retried_or_without_loss_is_told_too_or_not_at_all() -> None:
    retried = react(_state(retries=1), _exited(3, ((160.0, 220.0),)))
    assert [type(i) for i in retried] == [Note, Release]
    assert isinstance(retried[1], Release) and retried[1].handle == Handle(1, 0)
    plain = react(_state(), _exited(0, ()))
    assert [type(i) for i in plain] == [Finish]


def test_the_exit_record_carries_the_stretches(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "exit.json"
    base = '"exit_code": 0, "signal": null, "reason": "exited", "start_time": 1.0, "end_time": 9.0'
    path.write_text("{" + base + ', "output_lost": [[2.0, 3.5]]}')
    record = read_exit_record(path)
    assert record is not None and record.output_lost == ((2.0, 3.5),)
    path.write_text("{" + base + "}")  # an older supervisor's: nothing lost that it knew of
    older = read_exit_record(path)
    assert older is not None and older.output_lost == ()
    assert replace(older, output_lost=((1.0, 2.0),)).output_lost == ((1.0, 2.0),)
