"""The Python SDK (gpupool.sdk, issue 15) against a real daemon: jobs (submit, status, wait,
logs, cancel, list), refusals, and Python functions as jobs (submit_fn, map, the decorator),
with their values, their exceptions and jobs that end without a result.

Waits are on conditions with deadlines (futures' `result(timeout)`, `wait(timeout)`, the
harness's waits), never fixed sleeps.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import gpupool
import gpupool.sdk.decorator
from gpupool.sdk import (
    Client,
    DaemonNotRunning,
    Job,
    JobCancelled,
    JobFailed,
    JobNotFound,
    JobRefused,
    JobState,
    RemoteError,
    RemoteTraceback,
)
from integration import sdk_functions
from integration.backends import Databases
from integration.pool_harness import FOREVER, Pool, wait_for
from integration.shared_pool import end_active_jobs, module_pool_fixture  # noqa: F401

RESULT_S = 120  # a deadline for one function job on a busy 2-core machine


@pytest.fixture
def pool(module_pool: Pool) -> Iterator[Pool]:
    """One daemon per backend for the tests that look only at their own jobs
    (integration/shared_pool.py); it is idle again after each test."""
    yield module_pool
    end_active_jobs(module_pool)


@pytest.fixture
def own_pool(tmp_path: Path, databases: Databases) -> Iterator[Pool]:
    """A daemon of its own, as conftest's `pool`: for a test that asserts on every job the
    pool holds, or that restarts the daemon."""
    p = Pool(tmp_path / "pool", database_url=databases.new_url()).start()
    try:
        yield p
    finally:
        p.cleanup()


def _client_of(pool: Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Client:
    monkeypatch.setenv("GPUPOOL_SDK_DIR", str(tmp_path / "functions"))
    monkeypatch.setenv("GPUPOOL_STATE_DIR", str(pool.state_dir))
    monkeypatch.delenv("GPUPOOL_URL", raising=False)
    monkeypatch.setattr(gpupool.sdk.decorator, "_default", None)  # made from this env
    return Client()


@pytest.fixture
def client(pool: Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Client:
    """The SDK's default Client of the shared daemon (`pool`)."""
    return _client_of(pool, tmp_path, monkeypatch)


@pytest.fixture
def own_client(own_pool: Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Client:
    """The SDK's default Client of a daemon of the test's own (`own_pool`)."""
    return _client_of(own_pool, tmp_path, monkeypatch)


def call_dirs(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "functions").glob("call-*"))


def test_submit_wait_status_and_logs(own_client: Client) -> None:
    client = own_client  # the lists below are of every job the pool holds
    handle = client.submit(Job("sh -c 'echo hello; echo wörld; printf tail'", gpus=0))
    final = handle.wait(timeout=RESULT_S)
    assert (final.state, final.exit_code) == (JobState.SUCCEEDED, 0)
    assert handle.status().state is JobState.SUCCEEDED
    assert list(handle.logs()) == ["hello\n", "wörld\n", "tail"]
    assert client.job(handle.id) == handle
    listed = client.jobs(all=True, states=["succeeded"])
    assert [j.id for j in listed] == [handle.id]
    assert client.jobs() == []  # nothing active


def test_logs_follow_until_the_job_ends(client: Client, tmp_path: Path) -> None:
    go = tmp_path / "go"
    code = (
        "import os, sys, time\nprint('started', flush=True)\n"
        "while not os.path.exists(sys.argv[1]):\n    time.sleep(0.05)\nprint('done')"
    )
    handle = client.submit(Job(["python3", "-c", code, str(go)], gpus=1, name="follow"))
    lines = []
    for line in handle.logs(follow=True):  # ends when the job ends
        lines.append(line)
        if line == "started\n":
            go.touch()
    assert lines == ["started\n", "done\n"]
    assert handle.status().state is JobState.SUCCEEDED


def test_wait_times_out_and_cancel_ends_the_job(own_client: Client, own_pool: Pool) -> None:
    client, pool = own_client, own_pool  # the list below is of every job the pool holds
    handle = client.submit(Job(list(FOREVER), gpus=1, time="10m"))
    pool.wait_state(handle.id, "RUNNING")
    with pytest.raises(TimeoutError, match=f"job {handle.id} is still RUNNING after 0.2 s"):
        handle.wait(timeout=0.2)
    assert [j.id for j in client.jobs(states=["RUNNING"])] == [handle.id]
    handle.cancel()
    assert handle.wait(timeout=RESULT_S).state is JobState.CANCELLED


def test_refusals_and_missing_things_are_typed(client: Client, tmp_path: Path) -> None:
    with pytest.raises(JobRefused, match="^job refused: .*64 GPUs") as refused:
        client.submit(Job(["true"], gpus=64))
    assert refused.value.status >= 400
    with pytest.raises(JobNotFound):
        client.job(987654)
    nowhere = Client(state_dir=tmp_path / "no-pool")
    with pytest.raises(DaemonNotRunning, match="no daemon is running for .*`gpupool server`"):
        nowhere.submit(Job(["true"], gpus=0))


def test_submit_fn_returns_the_value(client: Client, tmp_path: Path) -> None:
    future = client.submit_fn(sdk_functions.add, 2, 3, times=10, gpus=0, name="adder")
    assert future.result(timeout=RESULT_S) == 50
    view = future.handle.status()
    assert (view.state, view.name) == (JobState.SUCCEEDED, "adder")
    wait_for(lambda: not call_dirs(tmp_path), 30, "the call's directory to be removed")


def test_submit_fn_raises_the_remote_exception_with_its_traceback(client: Client) -> None:
    future = client.submit_fn(sdk_functions.fails, "boom", gpus=0)
    with pytest.raises(ValueError, match="^boom$") as raised:
        future.result(timeout=RESULT_S)
    cause = raised.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    assert f"in job {future.job_id}" in cause.text
    assert "in fails" in cause.text and "ValueError: boom" in cause.text
    assert future.handle.status().state is JobState.FAILED
    assert "ValueError: boom" in "".join(future.handle.logs())  # the job's log shows it too


def test_an_exception_that_cannot_travel_comes_back_as_remote_error(client: Client) -> None:
    future = client.submit_fn(sdk_functions.fails_unpicklably, "locked", gpus=0)
    with pytest.raises(RemoteError) as raised:
        future.result(timeout=RESULT_S)
    error = raised.value
    assert error.type_name == "integration.sdk_functions.LockedError"
    assert error.message == "locked" and error.job_id == future.job_id
    assert "in fails_unpicklably" in error.traceback and "Remote traceback" in str(error)


def test_a_job_killed_before_its_result_fails_clearly(client: Client) -> None:
    future = client.submit_fn(sdk_functions.killed, gpus=0)
    with pytest.raises(JobFailed) as failed:
        future.result(timeout=RESULT_S)
    assert not isinstance(failed.value, JobCancelled)
    assert failed.value.job.state is JobState.FAILED
    assert str(failed.value).startswith(f"job {future.job_id} FAILED (exit 137): it was killed")
    assert f"`gpupool logs {future.job_id}`" in str(failed.value)


def test_cancelling_the_future_cancels_the_job(client: Client, pool: Pool, tmp_path: Path) -> None:
    future = client.submit_fn(sdk_functions.until_file, str(tmp_path / "never"), gpus=1)
    pool.wait_state(future.job_id, "RUNNING")
    assert future.cancel()
    assert pool.wait(future.job_id).state == "CANCELLED"
    wait_for(lambda: not call_dirs(tmp_path), 30, "the call's directory to be removed")


def test_a_job_cancelled_elsewhere_fails_its_future(client: Client, pool: Pool) -> None:
    future = client.submit_fn(sdk_functions.until_file, "/nonexistent/never", gpus=0)
    pool.wait_state(future.job_id, "RUNNING")
    pool.cancel(future.job_id)
    with pytest.raises(JobCancelled, match="cancelled before the function returned"):
        future.result(timeout=RESULT_S)


def test_map_and_the_decorator(client: Client) -> None:
    futures = client.map(sdk_functions.square, [1, 2, 3], gpus=0, time="5m")
    assert [f.result(timeout=RESULT_S) for f in futures] == [1, 4, 9]
    assert len({f.job_id for f in futures}) == 3
    add = gpupool.job(gpus=0, client=client)(sdk_functions.add)
    assert add(20, 1, times=2).result(timeout=RESULT_S) == 42
    assert add.local(1, 1) == 2
    # Decorated where it is defined, on the default Client (this test's environment).
    assert sdk_functions.triple(14).result(timeout=RESULT_S) == 42
    assert [f.result(timeout=RESULT_S) for f in sdk_functions.triple.map([1, 2])] == [3, 6]


def test_map_is_one_array_job(client: Client, tmp_path: Path) -> None:
    """map submits one array job (task i runs item i), throttled by max_parallel; each
    future has its own task's outcome, a raising item raises only its own; the shared
    payload directory goes when the last task has ended."""
    items = [3, -1, 5]
    futures = client.map(sdk_functions.square_or_fail, items, gpus=0, time="5m", max_parallel=2)
    views = [f.handle.status() for f in futures]
    array_id = views[0].id
    assert [(v.array_id, v.array_index, v.array_limit) for v in views] == [
        (array_id, 0, 2),
        (array_id, 1, 2),
        (array_id, 2, 2),
    ]
    assert futures[0].result(timeout=RESULT_S) == 9
    assert futures[2].result(timeout=RESULT_S) == 25
    with pytest.raises(ValueError, match="no negative numbers: -1"):
        futures[1].result(timeout=RESULT_S)
    functions = tmp_path / "functions"
    wait_for(lambda: not any(functions.iterdir()), 30, "the payload directory removed")
    assert client.map(sdk_functions.square, []) == []
    with pytest.raises(ValueError, match="max_parallel"):
        client.map(sdk_functions.square, [1], max_parallel=0)
    assert not any(functions.iterdir())  # refused before anything was written


def test_a_signal_is_not_a_result(client: Client, pool: Pool, tmp_path: Path) -> None:
    """A job whose runner is stopped by SIGTERM from outside (not a cancel): no result."""
    marker = tmp_path / "never"
    future = client.submit_fn(sdk_functions.until_file, str(marker), gpus=0)
    pool.wait_state(future.job_id, "RUNNING")
    child = wait_for(lambda: _job_pid(pool, future.job_id), 30, "the job's process")
    os.kill(child, signal.SIGTERM)
    with pytest.raises(JobFailed, match="exit 143.*stopped by signal 15 before the function"):
        future.result(timeout=RESULT_S)


def _job_pid(pool: Pool, job_id: int) -> int | None:
    import json

    path = pool.state_dir / "jobs" / str(job_id) / "child.json"
    try:
        return int(json.loads(path.read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("name", ["sdk_submit.py", "sdk_futures.py"])
def test_the_examples_run_as_they_are(pool: Pool, tmp_path: Path, name: str) -> None:
    env = {**pool.env, "GPUPOOL_SDK_DIR": str(tmp_path / "functions")}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    if name == "sdk_submit.py":
        assert "  | step 2\n" in done.stdout and "SUCCEEDED, exit code 0" in done.stdout
        # No GPU asked for: the job says so, never an empty `on GPUs ` (issue 30, item 20).
        assert "  | on GPUs none (the job asked for no GPU)" in lines, done.stdout
    else:
        assert "sweep: [0.9048, 0.366, 0.0]" in done.stdout, done.stdout
        assert "on no GPU" in done.stdout
        assert "check(-4.0) raised ValueError('negative input: -4.0')" in done.stdout
        # The job's traceback as the example prints it: the function's own file, line and
        # source, then the error line; nothing that is only the text's quotes.
        source = (EXAMPLES / name).read_text().splitlines()
        line = 1 + next(i for i, text in enumerate(source) if "raise ValueError" in text)
        frame = f'File "{EXAMPLES / name}", line {line}, in check'
        assert any(text.strip() == frame for text in lines), done.stdout
        assert any(text.strip().startswith("raise ValueError(") for text in lines), done.stdout
        assert "  ValueError: negative input: -4.0" in lines, done.stdout
        assert not [text for text in lines if text.strip() == '"""'], done.stdout


def test_a_handle_holds_releases_updates_and_signals(client: Client, tmp_path: Path) -> None:
    """The steering verbs from Python, as `gpupool hold/release/update/cancel --signal`."""
    waiting = client.submit(Job(["true"], gpus=0, begin="now+1h", time="1h"))
    assert waiting.hold().hold == "user"
    assert waiting.release().hold is None
    assert waiting.update(time="2h", priority="high").time_limit_s == 7200
    with pytest.raises(JobRefused) as refused:
        waiting.update(gpus=-1)
    assert [field for field, _ in refused.value.field_errors()] == ["gpus"]
    waiting.cancel()
    marker, ready = tmp_path / "got-usr1", tmp_path / "trap-set"
    script = f"trap 'touch {marker}' USR1; touch {ready}; while [ ! -e {marker} ]; do sleep 0.05; done; exit 0"
    running = client.submit(Job(["sh", "-c", script], gpus=0, time="5m"))
    wait_for(ready.exists, 60, "the job to set its trap")
    assert running.signal("USR1").state is JobState.RUNNING  # signalled, not cancelled
    assert running.wait(timeout=60).exit_code == 0  # it saw USR1 and ended by itself
    with pytest.raises(JobRefused):
        running.hold()  # ended: nothing to hold


def test_futures_are_watched_with_one_request_a_round(client: Client) -> None:
    """The futures' watcher asks about all its unfinished jobs in one list request per
    round (GET /v1/jobs?id=...), never one request per job: a map of 1,000 items would
    otherwise cost the daemon 1,000 requests every round (squeue -j, not squeue per job)."""
    import threading

    asked: list[str] = []
    request = client.http.request

    def counted(method: str, path: str, *args: object, **kwargs: object) -> object:
        if threading.current_thread().name == "gpupool-sdk-futures":
            asked.append(f"{method} {path}")
        return request(method, path, *args, **kwargs)  # type: ignore[arg-type]

    client.http.request = counted  # type: ignore[method-assign]
    futures = client.map(sdk_functions.square, list(range(12)), gpus=0, time="5m")
    assert [f.result(timeout=RESULT_S) for f in futures] == [n * n for n in range(12)]
    assert asked and set(asked) == {"GET /v1/jobs"}, asked


def test_a_future_outlives_a_daemon_restart(
    own_client: Client, own_pool: Pool, tmp_path: Path
) -> None:
    """While the daemon is down the watcher's list request fails (PoolUnreachable): it
    asks again later, and the future settles once the re-adopted job ends."""
    client, pool = own_client, own_pool  # the daemon is stopped: a pool of its own
    gate = tmp_path / "go"
    future = client.submit_fn(sdk_functions.until_file, str(gate), gpus=0)
    wait_for(lambda: future.handle.status().state is JobState.RUNNING, 60, "the job running")
    pool.stop()
    gate.touch()  # the job ends while the daemon is away
    pool.start()
    assert future.result(timeout=RESULT_S) == "released"
