"""The executor contract (core/execution.py, core/backends.py), one set of tests run against
every implementation (contract/conftest.py): the local executor, a real Slurm, a real Ray and
the recorded Kubernetes API server playing a cluster (contract/kubernetes_play.py).

Each test states one clause of the contract and checks it through the Executor protocol
only, as the engine drives it: launch is idempotent; one poll answers many runs; a stop is
SIGTERM, the run's own grace, SIGKILL; a preemption reads PREEMPTED; a new executor object
adopts a running run and sees it end; release is idempotent and frees the job for its next
attempt; logs are the job's output, every attempt's in order, by byte offset; and what an
implementation declares it can do (`Capabilities`) is what it does, what it lacks being
refused in words that name the field.

Every backend's run is pinned to one of its engine's nodes, as the pool admits runs by
default (`BackendRequest.pinned`, admission "pool": contract/subjects.py `admitted_to`), so
each clause holds with admission on.

Where an implementation cannot show a clause (the recorded Kubernetes server runs no
process: no SIGTERM reaches anything), the test asserts what the implementation declares
instead (`runs_commands`, the grace it hands the cluster), never skips. Nothing sleeps a
fixed time: every wait is a condition with a deadline (subjects.wait_for).
"""

from __future__ import annotations

import dataclasses

import pytest

from contract.subjects import Subject, wait_for, wait_obs
from gpupool.core.execution import (
    Executor,
    ExitReason,
    Handle,
    LogChunk,
    Observation,
    RunState,
    StopKind,
)
from gpupool.core.job import JobSpec, Resources
from gpupool.service.backend_choice import Refusal, settle_backend

pytestmark = pytest.mark.integration

GRACE_S = 6.0  # longer than Slurm's KillWait (2 s here) and Ray's default stop wait (3 s)
MAX_CALLS_PER_POLL = 2  # a Job list and, for failed runs, a pod list (Kubernetes)


def running(obs: Observation) -> bool:
    return obs.state is RunState.RUNNING


def exited(obs: Observation) -> bool:
    return obs.state is RunState.EXITED


def started(subject: Subject, handle: Handle) -> None:
    """Until the run is RUNNING and its command has set itself up."""
    wait_obs(subject.executor, handle, running)
    subject.wait_ready(handle)


def log_with(ex: Executor, handle: Handle, text: bytes) -> LogChunk:
    """The run's whole log once `text` is in it (a backend's log may trail its end)."""

    def read() -> LogChunk | None:
        chunk = ex.logs(handle, 0, 1 << 20)
        return chunk if text in chunk.data else None

    found: LogChunk = wait_for(f"{text!r} in the log of {handle}", read, 60.0)
    return found


def test_launch_is_idempotent(subject: Subject) -> None:
    """A launch repeated (a crash between launch and commit), even by a new executor
    object, leaves the run started once as it is."""
    ex = subject.executor
    h = subject.new_handle()
    req = subject.request(h, "wait", 0)
    ex.launch(req)
    ex.launch(req)
    started(subject, h)
    again = subject.reopen()
    again.launch(req)
    subject.finish(h)
    obs = wait_obs(again, h, exited)
    assert obs.exit is not None and (obs.exit.exit_code, obs.exit.reason) == (0, ExitReason.EXITED)
    assert subject.runs_of(h) == 1
    if subject.runs_commands:
        assert subject.starts(h) == 1


def test_one_poll_answers_many_runs(subject: Subject) -> None:
    """One call for every run asked about, each with its own state, never one call per
    run; a handle never launched is UNLAUNCHED."""
    ex = subject.executor
    done, failed, waiting = (subject.new_handle() for _ in range(3))
    never = [subject.new_handle() for _ in range(10)]
    ex.launch(subject.request(done, "exit", 0))
    ex.launch(subject.request(failed, "exit", 3))
    ex.launch(subject.request(waiting, "wait", 0))
    wait_for(
        "two runs over and one running",
        lambda: (
            [o.state for o in ex.poll([done, failed, waiting]).values()]
            == [RunState.EXITED, RunState.EXITED, RunState.RUNNING]
        ),
    )
    before = subject.calls()
    seen = ex.poll([done, failed, waiting, *never])
    assert subject.calls() - before <= MAX_CALLS_PER_POLL
    assert set(seen) == {done, failed, waiting, *never}
    ended = [seen[h].exit for h in (done, failed)]
    assert [(e.exit_code, e.reason) for e in ended if e is not None] == [
        (0, ExitReason.EXITED),
        (3, ExitReason.EXITED),
    ]
    assert seen[waiting].state is RunState.RUNNING
    assert {seen[h].state for h in never} == {RunState.UNLAUNCHED}
    assert ex.poll([]) == {}


def test_a_stop_is_sigterm_the_runs_grace_then_sigkill(subject: Subject) -> None:
    """A cancel of a run that ignores SIGTERM: it runs on through its own grace
    (LaunchRequest.grace_s, not the engine's default), is killed after it, and reads
    CANCELLED; asking again changes nothing; a stop of what is over is False."""
    ex = subject.executor
    h = subject.new_handle()
    ex.launch(subject.request(h, "stubborn", grace_s=GRACE_S))
    started(subject, h)
    assert ex.signal(h, StopKind.CANCEL) is True
    if subject.runs_commands:
        wait_for("SIGTERM reached the command", (subject.run_dir(h) / "term").exists)
    ex.signal(h, StopKind.CANCEL)  # asked again: the grace goes on, not anew
    obs = wait_obs(ex, h, exited)
    assert obs.exit is not None and obs.exit.reason is ExitReason.CANCELLED
    if subject.runs_commands:
        term, last_alive = subject.times_in_grace(h)
        assert last_alive - term >= GRACE_S - 0.5, last_alive - term  # ran on through it
        assert last_alive - term < GRACE_S + 30.0, last_alive - term  # then was killed
        assert subject.gone(h)
    else:  # the cluster's kubelet stops it: the grace it was given is the run's
        assert subject.grace_declared(h) == GRACE_S
    assert ex.signal(h, StopKind.CANCEL) is False
    assert ex.signal(subject.new_handle(), StopKind.CANCEL) is False  # never launched


def test_a_preemption_reads_preempted_and_a_later_cancel_changes_nothing(
    subject: Subject,
) -> None:
    """A preemption is a stop whose run reads PREEMPTED (so the engine requeues it),
    whether or not the implementation tells the run itself (`preemption_signal`); once it
    is over, a cancel is False and leaves its end as it was."""
    ex = subject.executor
    h = subject.new_handle()
    ex.launch(subject.request(h, "wait", 0))
    started(subject, h)
    assert ex.signal(h, StopKind.PREEMPT) is True
    obs = wait_obs(ex, h, exited)
    assert obs.exit is not None and obs.exit.reason is ExitReason.PREEMPTED
    assert ex.signal(h, StopKind.CANCEL) is False
    after = ex.poll([h])[h]
    assert after.exit is not None and after.exit.reason is ExitReason.PREEMPTED


def test_a_new_executor_adopts_a_running_run_and_sees_it_end(subject: Subject) -> None:
    """After a restart of the daemon a new executor object takes the run back: RUNNING,
    then its own end, exit code and all."""
    assert subject.executor.capabilities.adopts_after_restart
    h = subject.new_handle()
    subject.executor.launch(subject.request(h, "wait", 3))
    started(subject, h)
    fresh = subject.reopen()
    assert fresh.adopt([h])[h].state is RunState.RUNNING
    subject.finish(h)
    obs = wait_obs(fresh, h, exited)
    assert obs.exit is not None and (obs.exit.exit_code, obs.exit.reason) == (3, ExitReason.EXITED)


def test_release_is_idempotent_and_frees_the_next_attempt(subject: Subject) -> None:
    """An ended run released (False while something of it still holds on, then True, and
    True again) keeps its end readable, and the job's next attempt starts and runs."""
    ex = subject.executor
    first = subject.new_handle()
    ex.launch(subject.request(first, "exit", 0))
    wait_obs(ex, first, exited)
    wait_for("the run released", lambda: ex.release(first))
    assert ex.release(first) is True
    kept = ex.poll([first])[first]
    assert kept.state in (RunState.RELEASED, RunState.EXITED)
    assert kept.exit is not None and kept.exit.exit_code == 0
    second = subject.handle(first.job_id, 1)
    assert ex.poll([second])[second].state is RunState.UNLAUNCHED
    ex.launch(subject.request(second, "exit", 0))
    obs = wait_obs(ex, second, exited)
    assert obs.exit is not None and obs.exit.exit_code == 0


def test_logs_are_the_jobs_output_by_offset_every_attempt_in_order(subject: Subject) -> None:
    """The run's output, read whole or from an offset; past the end reads nothing; the
    next attempt's log is the job's: the earlier attempt's output, then its own."""
    ex = subject.executor
    first = subject.new_handle()
    ex.launch(subject.request(first, "exit", 0))
    wait_obs(ex, first, exited)
    whole = log_with(ex, first, subject.output(first))
    assert whole.offset == len(whole.data) and whole.size == len(whole.data)
    part = ex.logs(first, 3, 5)
    assert (part.data, part.offset) == (whole.data[3:8], 8)
    past = ex.logs(first, len(whole.data) + 10, 100)
    assert past.data == b""
    wait_for("the run released", lambda: ex.release(first))
    second = subject.handle(first.job_id, 1)
    ex.launch(subject.request(second, "exit", 0))
    wait_obs(ex, second, exited)
    both = log_with(ex, second, subject.output(second))
    earlier, later = subject.output(first), subject.output(second)
    assert earlier in both.data, both.data
    assert both.data.index(earlier) < both.data.index(later)


def test_capabilities_are_declared_and_what_is_lacked_is_refused(subject: Subject) -> None:
    """What it declares is what its documentation says; a multi-node job, or a job with an
    image, is refused at submit in words that name the field where it lacks the
    capability (service/backend_choice.py), and a launch with an image reaching one that
    runs no containers ends SPAWN_FAILED saying so, rather than running on the host; a
    share of one GPU is refused by field where `fractional_gpus` is lacked.
    `preemption_signal` lacked is a stop that still reads PREEMPTED (tested above);
    `arrays` is declared by none: the pool expands arrays itself."""
    ex = subject.executor
    caps = ex.capabilities
    assert caps == subject.declared
    assert caps.arrays is False
    backend = subject.backend
    name = None if backend is None else backend.name
    backends = {} if backend is None else {backend.name: backend}
    plain = JobSpec(command=("true",), backend=name)

    wide = settle_backend(dataclasses.replace(plain, nodes=2), None, backends)
    if caps.multi_node:
        assert isinstance(wide, JobSpec) and wide.nodes == 2
    else:
        assert isinstance(wide, Refusal) and wide.message.startswith("nodes: "), wide

    half = Resources(gpus=1, gpu_fraction=0.5)
    shared = settle_backend(dataclasses.replace(plain, resources=half), None, backends)
    if backend is None or caps.fractional_gpus:  # the pool's own machine shares GPUs itself
        assert isinstance(shared, JobSpec) and shared.resources == half
    else:
        assert isinstance(shared, Refusal) and shared.message.startswith("gpus: "), shared

    boxed = settle_backend(dataclasses.replace(plain, image="busybox"), None, backends)
    if caps.containers:
        assert isinstance(boxed, JobSpec) and boxed.image == "busybox"
        return
    assert isinstance(boxed, Refusal) and boxed.message.startswith("image: "), boxed
    assert list(ex.container_engines()) == []
    h = subject.new_handle()
    ex.launch(subject.request(h, "exit", 0, image="busybox"))
    obs = wait_obs(ex, h, lambda o: o.state not in (RunState.UNLAUNCHED, RunState.QUEUED))
    assert obs.exit is not None and obs.exit.reason is ExitReason.SPAWN_FAILED, obs
    assert "container" in obs.exit.message, obs.exit.message
    assert subject.starts(h) == 0  # never run on the host instead
