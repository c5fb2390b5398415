"""The engine's reactions to what the GPU monitor reports (engine/react.py): memory held
outside gpupool, and the idle-GPU policy's preemptions."""

from __future__ import annotations

from dataclasses import replace

from test_engine_react import NOW, engine_state, job, running, state_usage

from gpupool.core.execution import StopKind
from gpupool.core.job import Resources
from gpupool.engine.events import ForeignMemory, PreemptAsked, Signal, Signalled
from gpupool.engine.react import react


def test_foreign_memory_counts_as_unmanaged_and_a_change_asks_for_a_pass() -> None:
    from gpupool.policy import decide

    plain = job(1)
    shared = replace(
        plain, spec=replace(plain.spec, resources=Resources(1, gpu_memory_bytes=30 << 30))
    )
    state = engine_state(shared, gpus=1)
    state.dirty = False
    react(state, ForeignMemory({("box", 0): 60 << 30}))  # a process outside the pool: 60 GiB
    assert state.dirty and state.snapshot(1, state_usage()).unmanaged_memory == {
        ("box", 0): 60 << 30
    }
    snapshot = state.snapshot(1, state_usage())
    assert decide(snapshot, NOW).starts == ()  # 30 GiB do not fit in the 20 GiB left
    state.dirty = False
    react(state, ForeignMemory({("box", 0): 60 << 30}))  # the same: nothing to decide again
    assert not state.dirty
    react(state, ForeignMemory({}))  # it exited
    assert state.dirty and state.snapshot(1, state_usage()).unmanaged_memory == {}
    (start,) = decide(state.snapshot(1, state_usage()), NOW).starts
    assert start.job_id == 1


def test_a_preemption_asked_of_a_running_job_signals_it_once() -> None:
    state = engine_state(running(1), job(2))
    (signal,) = react(state, PreemptAsked(1, "idle for 30m"))
    assert isinstance(signal, Signal) and signal.kind is StopKind.PREEMPT
    assert signal.why == "idle for 30m"
    react(state, Signalled(1, StopKind.PREEMPT, True, "idle for 30m"))
    assert react(state, PreemptAsked(1, "again")) == []  # already being stopped
    assert react(state, PreemptAsked(2, "pending")) == []  # not running
    assert react(state, PreemptAsked(9, "gone")) == []
