"""The SDK's function-job files and runner (sdk/payload.py, sdk/runner.py), its Job spec
(sdk/job_spec.py) and how remote exceptions are rebuilt (sdk/functions.py): no daemon."""

from __future__ import annotations

import inspect
import os
import pickle
import stat
import sys
import threading
from pathlib import Path

import pytest

from gpupool.sdk import Client, Job, JobOptions, RemoteError, RemoteTraceback, SpecError
from gpupool.sdk.functions import functions_dir, new_call_dir, rebuild
from gpupool.sdk.job_spec import BACKEND_FIELDS, CONTAINER_FIELDS
from gpupool.sdk.payload import (
    CALL_FILE,
    OUTCOME_FILE,
    Call,
    PayloadError,
    Raised,
    Returned,
    read_call,
    read_outcome,
    run_call,
    write_call,
    write_outcome,
)
from gpupool.sdk.runner import main as runner_main


def test_a_call_round_trips_closures_and_lambdas(tmp_path: Path) -> None:
    base = 10
    write_call(tmp_path / CALL_FILE, lambda x, y=1: base + x * y, (2,), {"y": 3})
    assert stat.S_IMODE((tmp_path / CALL_FILE).stat().st_mode) == 0o600
    call = read_call(tmp_path / CALL_FILE)
    assert run_call(call) == Returned(16)


def test_the_submitter_s_sys_path_is_put_first(tmp_path: Path) -> None:
    extra = str(tmp_path / "my-modules")
    write_call(tmp_path / CALL_FILE, len, ([],), {}, sys_path=[extra])
    try:
        read_call(tmp_path / CALL_FILE)
        assert sys.path[0] == extra
    finally:
        sys.path.remove(extra)


def test_another_python_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / CALL_FILE
    write_call(path, len, ([],), {})
    envelope = pickle.loads(path.read_bytes())
    envelope["python"] = [2, 7]
    path.write_bytes(pickle.dumps(envelope))
    with pytest.raises(PayloadError, match="pickled by Python 2.7 and this job runs Python 3"):
        read_call(path)


def test_outcomes_round_trip(tmp_path: Path) -> None:
    path = tmp_path / OUTCOME_FILE
    assert read_outcome(path) is None  # no file: the job wrote none
    write_outcome(path, Returned({"loss": 0.25}))
    assert read_outcome(path) == Returned({"loss": 0.25})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [OUTCOME_FILE]  # no temporary left


def test_a_raised_exception_keeps_type_message_and_traceback(tmp_path: Path) -> None:
    def broken() -> None:
        raise KeyError("missing")

    outcome = run_call(read_back(tmp_path, broken))
    assert isinstance(outcome, Raised)
    assert (outcome.type_name, outcome.message) == ("KeyError", "'missing'")
    assert "in broken" in outcome.traceback and "run_call" not in outcome.traceback
    exc = rebuild(outcome, job_id=7)
    assert isinstance(exc, KeyError) and exc.args == ("missing",)
    assert isinstance(exc.__cause__, RemoteTraceback)
    assert "in job 7" in str(exc.__cause__) and "in broken" in str(exc.__cause__)


def test_a_function_sent_by_value_names_its_own_file_and_line_in_a_traceback(
    tmp_path: Path,
) -> None:
    """cloudpickle sends a function's code as `<dynamic-code>`; the SDK sends it with the
    file it was defined in, so the job's traceback names that file, the line and its source."""

    def broken(x: float) -> None:
        raise ValueError(f"negative input: {x}")  # the line the traceback must show

    line = broken.__code__.co_firstlineno + 1
    outcome = run_call(read_back(tmp_path, lambda: broken(-4.0)))
    assert isinstance(outcome, Raised)
    assert f'File "{__file__}", line {line}, in broken' in outcome.traceback, outcome.traceback
    assert 'raise ValueError(f"negative input: {x}")' in outcome.traceback
    assert "<dynamic-code>" not in outcome.traceback


def test_an_exception_that_does_not_pickle_is_a_remote_error(tmp_path: Path) -> None:
    class Locked(Exception):
        def __init__(self) -> None:
            super().__init__("held")
            self.lock = threading.Lock()

    def broken() -> None:
        raise Locked()

    outcome = run_call(read_back(tmp_path, broken))
    assert isinstance(outcome, Raised) and outcome.exception is None
    exc = rebuild(outcome, job_id=3)
    assert isinstance(exc, RemoteError)
    assert exc.type_name.endswith("Locked") and exc.message == "held" and exc.job_id == 3
    assert str(exc).startswith(f"{exc.type_name} in job 3: held\n\nRemote traceback:\n")


def test_a_return_value_that_cannot_travel_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / OUTCOME_FILE
    write_outcome(path, Returned(threading.Lock()))
    outcome = read_outcome(path)
    assert isinstance(outcome, Raised) and outcome.type_name == "_pickle.PicklingError"
    assert "returned a lock, which cannot be pickled" in outcome.message


def read_back(tmp_path: Path, fn: object) -> Call:
    assert callable(fn)
    write_call(tmp_path / CALL_FILE, fn, (), {})
    return read_call(tmp_path / CALL_FILE)


def test_the_runner_exits_by_outcome(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    call, outcome = tmp_path / CALL_FILE, tmp_path / OUTCOME_FILE
    write_call(call, divmod, (7, 2), {})
    assert runner_main([str(call), str(outcome)]) == 0
    assert read_outcome(outcome) == Returned((3, 1))
    write_call(call, divmod, (7, 0), {})
    assert runner_main([str(call), str(outcome)]) == 1
    assert "ZeroDivisionError" in capsys.readouterr().err  # in the job's log too
    call.write_bytes(b"not a pickle")
    assert runner_main([str(call), str(outcome)]) == 2
    failed = read_outcome(outcome)
    assert isinstance(failed, Raised) and failed.type_name == "_pickle.UnpicklingError"
    assert runner_main([]) == 2


def test_call_directories_are_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPOOL_SDK_DIR", str(tmp_path / "fns"))
    where = new_call_dir(len, ([1],), {})
    assert stat.S_IMODE(functions_dir().stat().st_mode) == 0o700
    assert stat.S_IMODE(where.stat().st_mode) == 0o700
    assert (where / CALL_FILE).exists()
    (tmp_path / "fns").chmod(0o755)
    with pytest.raises(ValueError, match="closed to others .*chmod 700"):
        functions_dir()
    (tmp_path / "fns").chmod(0o700)
    with pytest.raises(TypeError):  # what cloudpickle cannot pickle fails before a submit
        new_call_dir(len, (threading.Lock(),), {})
    assert len(list((tmp_path / "fns").iterdir())) == 1  # the failed call left nothing


def test_job_fields_are_checked_by_the_spec_parser() -> None:
    with pytest.raises(SpecError) as bad:
        Job(["train"], gpus=-1, time="soon", env={"1BAD": "x"})
    assert {e.field for e in bad.value.errors} == {"gpus", "time", "env.1BAD"}
    job = Job("python train.py --lr 3e-4", workdir="runs", priority="high")
    assert job.spec.command == ("python", "train.py", "--lr", "3e-4")
    assert job.spec.workdir == os.path.join(os.getcwd(), "runs")
    wire = job.to_wire()
    assert (wire["gpus"], wire["time_limit_s"], wire["project"]) == (1, 3600.0, None)


def test_the_job_options_are_job_s_fields_and_submit_fn_s_keywords() -> None:
    # All but the container's and the backend's (a function job runs this interpreter on
    # the host, its call in this machine's cache directory) and the array (Client.map makes one from its items).
    skip = ("command", "spec", "array", *CONTAINER_FIELDS, *BACKEND_FIELDS)
    fields = [f for f in Job.__dataclass_fields__ if f not in skip]
    assert list(JobOptions.__annotations__) == fields
    keywords = [
        name
        for name, p in inspect.signature(Client.submit_fn).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    assert keywords == fields


def test_a_job_for_a_backend_sends_its_backend_and_nodes() -> None:
    wire = Job("python train.py", gpus=2, backend="hpc", nodes=2).to_wire()
    assert (wire["backend"], wire["nodes"], wire["gpus"]) == ("hpc", 2, 2)
    assert "backend" not in Job("python train.py").to_wire()
    with pytest.raises(ValueError, match="nodes"):
        Job("python train.py", nodes=0)
